/**
 * Renames deprecated query parameter names to canonical ones, changing nothing but the name's bytes
 * (SPEC §5; service document part 9, rule 1: the canonical field wins).
 */
import { isUtf8 } from 'node:buffer';
import type { AliasRename } from './table.ts';

/** Result of {@link rewriteQuery}. */
export interface QueryRewriteResult {
  /** The query to forward, without `?`; the identical string when nothing changed. */
  readonly query: string;
  /**
   * Aliases the query used (whether renamed or dropped; with `cloaked`, also those only a parser that
   * splits on `;` reads), in the order of `renames`.
   */
  readonly aliasesUsed: string[];
  /**
   * Set when a parser that also splits parameters on `;` would read the query differently: the first
   * alias (in the order of `renames`) such that the alias, or its canonical name while the alias is
   * present, stands next to a raw `;` (after it, or before the first `;` of a key), or an alias piece
   * to be dropped holds a raw `;` (see {@link rewriteQuery}). `query` is then `rawQuery` unchanged: no
   * rename can be right for both kinds of parser.
   */
  readonly cloaked?: string;
}

/** The hex digit after `%5` that encodes each bracket (`%5B`, `%5D`), lower case. */
const BRACKET_HEX = { '[': 'b', ']': 'd' } as const;

/** Length of a raw `bracket` (1) or its percent-encoding, `%5B`/`%5D` in either case (3), at `at`; else 0. */
function bracketAt(key: string, at: number, bracket: '[' | ']'): number {
  if (key[at] === bracket) return 1;
  return key[at] === '%' && key[at + 1] === '5' && key[at + 2]?.toLowerCase() === BRACKET_HEX[bracket]
    ? 3
    : 0;
}

/**
 * Where the base name of a raw key lies, as qs-style parsers (Express's extended query parser) read
 * it: before the first `[` or its encoded form `%5B`, which starts a bracket suffix (`tags[]`, `tags[x]`,
 * `tags%5B%5D`); or, for a key that starts with a bracket, inside that first bracket pair (`[tags]`,
 * `%5Btags%5D`, `[tags][]` are all `tags` to qs). A leading bracket that is not closed before another
 * opens, or not at all, leaves the whole key as the name (qs reads it so).
 * @returns `[start, end)` of the raw base name in `key`.
 */
function baseName(key: string): [start: number, end: number] {
  const open = bracketAt(key, 0, '[');
  if (open > 0) {
    for (let j = open; j < key.length; j++) {
      if (bracketAt(key, j, '[') > 0) break;
      if (bracketAt(key, j, ']') > 0) return [open, j];
    }
    return [0, key.length];
  }
  for (let j = 0; j < key.length; j++) if (bracketAt(key, j, '[') > 0) return [0, j];
  return [0, key.length];
}

/** The byte a `%XX` escape at `at` encodes (two hex digits after the `%`), or -1 when it is malformed. */
function escapedByte(raw: string, at: number): number {
  if (raw.charCodeAt(at) !== 0x25 /* % */) return -1;
  const high = hexValue(raw.charCodeAt(at + 1));
  const low = hexValue(raw.charCodeAt(at + 2));
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  const lower = code | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/**
 * Whether `decodeURIComponent(raw)` succeeds, found without letting it throw (ECMA-262 `Decode`): every
 * `%` starts two hex digits; an escaped byte of 0x80 or more leads a UTF-8 sequence of 2 to 4 bytes
 * whose continuation bytes are the escapes right after it, and the sequence is valid UTF-8 (RFC 3629:
 * no overlong form, no surrogate, nothing above U+10FFFF; `isUtf8`). Linear in `raw`.
 */
function decodesAsUriComponent(raw: string): boolean {
  let at = raw.indexOf('%');
  while (at !== -1) {
    const lead = escapedByte(raw, at);
    if (lead < 0) return false;
    at += 3;
    if (lead >= 0x80) {
      const length = lead >= 0xf8 ? 0 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
      if (length === 0) return false;
      const sequence = new Uint8Array(length);
      sequence[0] = lead;
      for (let k = 1; k < length; k++, at += 3) {
        const next = escapedByte(raw, at);
        if (next < 0) return false;
        sequence[k] = next;
      }
      if (!isUtf8(sequence)) return false;
    }
    at = raw.indexOf('%', at);
  }
  return true;
}

/**
 * Percent-decodes a raw base name (RFC 3986 §2.1; the decoding of `decodeURIComponent`, ECMA-262
 * `Decode`). Never lets `decodeURIComponent` throw: an exception per piece cost ~10 µs, so a 16 KiB
 * query of 7,900 pieces `%&%&…` held the event loop ~85 ms where a query of the same size took 3 ms
 * (docs/reliability.md fix 83).
 * @param raw The name as it stands in the query string, still percent-encoded.
 * @returns The decoded name; `raw` itself when it has no `%`; `undefined` when it is not valid
 *   percent-encoded UTF-8 (a `%` without two hex digits, an invalid or cut UTF-8 sequence). Never throws.
 * @example
 * decodeName('t%61gs') // → 'tags'
 * decodeName('%ff') // → undefined
 */
export function decodeName(raw: string): string | undefined {
  if (!raw.includes('%')) return raw;
  return decodesAsUriComponent(raw) ? decodeURIComponent(raw) : undefined;
}

/**
 * The names a parser that also splits parameters on a raw `;` reads where {@link rewriteQuery} reads
 * none or another: each piece after a `;`, and the piece before the first `;` of a key (`x;tags=a` is
 * the name `x;tags` to an `&` parser). Decoded as {@link rewriteQuery} decodes names.
 * @param pieces The query split on `&`.
 * @returns The names, in order (`undefined` for a name that is not valid percent-encoded UTF-8).
 */
function namesAfterSemicolons(pieces: readonly string[]): (string | undefined)[] {
  const found: (string | undefined)[] = [];
  for (const piece of pieces) {
    const semicolon = piece.indexOf(';');
    if (semicolon < 0) continue;
    const eq = piece.indexOf('=');
    const parts = piece.split(';');
    for (let k = eq < 0 || eq > semicolon ? 0 : 1; k < parts.length; k++) {
      const part = parts[k]!;
      const partEq = part.indexOf('=');
      const base = baseName(partEq < 0 ? part : part.slice(0, partEq));
      found.push(decodeName(part.slice(base[0], base[1])));
    }
  }
  return found;
}

/**
 * The cloaking report of {@link rewriteQuery} for a query that holds a raw `;`: the first alias (in the
 * order of `renames`) that stands next to a `;` ({@link namesAfterSemicolons}), or whose canonical name
 * does while the alias is present, or whose piece would be dropped beside the canonical name and holds
 * a `;` before more text (a `;`-splitting parser reads that text as parameters of their own:
 * `metadataByTypeUuid=m&tags=a;take=10`).
 * @param renames The route's renames.
 * @param pieces The query split on `&`.
 * @param names Each piece's decoded name, as {@link rewriteQuery} reads it.
 * @returns `{ aliasesUsed, cloaked }` (every alias either reading holds), or `undefined` when no rename
 *   is in doubt.
 */
function cloakedResult(
  renames: readonly AliasRename[],
  pieces: readonly string[],
  names: readonly (string | undefined)[],
): { aliasesUsed: string[]; cloaked: string } | undefined {
  const after = namesAfterSemicolons(pieces);
  const drops = (canonical: string, alias: string) =>
    names.includes(canonical) && pieces.some((piece, p) => names[p] === alias && /;[^;]/.test(piece));
  const doubtful = renames.find(
    ({ canonical, alias }) =>
      after.includes(alias) ||
      (after.includes(canonical) && names.includes(alias)) ||
      drops(canonical, alias),
  );
  if (doubtful === undefined) return undefined;
  const aliasesUsed = renames
    .filter((r) => names.includes(r.alias) || after.includes(r.alias))
    .map((r) => r.alias);
  return { aliasesUsed, cloaked: doubtful.alias };
}

/**
 * Rewrites the parameter names of a raw query string. A parameter's name is its key up to the first `[`,
 * or inside a leading `[…]`, after percent-decoding (`t%61gs`, `tags[]`, `tags[x]`, `tags%5B%5D`,
 * `[tags]` and `%5Btags%5D` are all forms of `tags`, as qs reads them); names match case-sensitively. For each rename: when any form of the canonical name is present, every form of
 * the alias is dropped with one `&`; otherwise every alias form has its base-name bytes replaced by the
 * canonical name, keeping the raw suffix (`tags%5B%5D=v` → `metadataByTypeUuid%5B%5D=v`). All other
 * bytes — values, other parameters, empty pieces (`a=1&&b=2`), encodings — stay exactly as sent; the
 * query is never round-tripped through a parser.
 *
 * Parameter cloaking (CVE-2021-23336's class): this splits parameters on `&` only, as Express, Django and
 * Python ≥ 3.9.2 do, but Twisted, Rack 2, CherryPy, Python before 3.9.2 and Go before 1.17 also split on
 * a raw `;`. For them, `x=1;tags=a` holds a parameter `tags` that this reads as part of `x`'s value,
 * `tags=a;metadataByTypeUuid=m` holds the canonical name, which must win (service document part 9,
 * rule 1), and dropping `tags=a;take=10` beside the canonical name would drop their `take`. When an
 * alias, or the canonical name of an alias the query uses, stands next to a raw `;`, or an alias piece
 * to drop holds one, the result says so (`cloaked`) and nothing is renamed: renaming there would change
 * a value for the first kind of parser. A `;` encoded as `%3B` is a value's byte for both. (Names are
 * read by qs's rules throughout: Rack's own bracket rules, `]tags` or `tags]`, are not recognised, with
 * or without a `;`.)
 *
 * @param renames Canonical/alias pairs of the matched route (alias table, `query` rows).
 * @param rawQuery The query without the leading `?` (`''` for none).
 * @returns `{ query, aliasesUsed, cloaked? }`; `query` is `rawQuery` itself when nothing changed.
 *   Never throws (a key with malformed percent-encoding simply matches no name).
 * @example
 * rewriteQuery([{ canonical: 'metadataByTypeUuid', alias: 'tags' }], 'tags[abc]=1&take=10');
 * // → { query: 'metadataByTypeUuid[abc]=1&take=10', aliasesUsed: ['tags'] }
 */
export function rewriteQuery(renames: readonly AliasRename[], rawQuery: string): QueryRewriteResult {
  // Fast path: no alias can be spelled without its literal bytes or a percent sign.
  if (!rawQuery.includes('%') && !renames.some((r) => rawQuery.includes(r.alias))) {
    return { query: rawQuery, aliasesUsed: [] };
  }

  const pieces = rawQuery.split('&');
  const bases = new Array<[start: number, end: number]>(pieces.length);
  const names = new Array<string | undefined>(pieces.length);
  for (let p = 0; p < pieces.length; p++) {
    const piece = pieces[p]!;
    const eq = piece.indexOf('=');
    const base = baseName(eq < 0 ? piece : piece.slice(0, eq));
    bases[p] = base;
    names[p] = decodeName(piece.slice(base[0], base[1]));
  }

  if (rawQuery.includes(';')) {
    const cloaked = cloakedResult(renames, pieces, names);
    if (cloaked !== undefined) return { query: rawQuery, ...cloaked };
  }

  const aliasesUsed: string[] = [];
  const dropped = new Uint8Array(pieces.length);
  let changed = false;
  for (const { canonical, alias } of renames) {
    if (!names.includes(alias)) continue;
    aliasesUsed.push(alias);
    changed = true;
    const canonicalPresent = names.includes(canonical);
    for (let p = 0; p < pieces.length; p++) {
      if (names[p] !== alias) continue;
      if (canonicalPresent) dropped[p] = 1;
      else {
        const [start, end] = bases[p]!;
        pieces[p] = pieces[p]!.slice(0, start) + canonical + pieces[p]!.slice(end);
      }
    }
  }
  if (!changed) return { query: rawQuery, aliasesUsed };
  // Pieces were separated by exactly one '&' each; joining the kept ones drops one '&' per dropped piece.
  return { query: pieces.filter((_, p) => dropped[p] === 0).join('&'), aliasesUsed };
}
