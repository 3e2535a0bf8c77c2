/**
 * Renames deprecated top-level members of a JSON request body to their canonical names, editing the
 * bytes in place (SPEC §5; service document part 9, rule 1: the canonical field wins).
 */
import { ShimError } from '../core/errors.ts';
import {
  type KeyNames,
  type ScanHandler,
  scanJson,
  skipWhitespace,
  skipWhitespaceBack,
} from './json-scan.ts';
import { isAlias, pairOf, renameKeyNames } from './rename-names.ts';
import type { AliasRename } from './table.ts';

/** Result of {@link rewriteBody}. */
export interface BodyRewriteResult {
  /** The body to forward: the same Buffer when nothing changed, otherwise a new one. */
  readonly body: Buffer;
  /** Aliases the body used (whether renamed or dropped), in the order of `renames`. */
  readonly aliasesUsed: string[];
}

interface Compiled {
  readonly names: KeyNames;
  /** `"canonical"` as JSON bytes, per rename. */
  readonly canonicalTokens: readonly Buffer[];
}

const compiledCache = new WeakMap<readonly AliasRename[], Compiled>();

function compile(renames: readonly AliasRename[]): Compiled {
  let compiled = compiledCache.get(renames);
  if (compiled === undefined) {
    compiled = {
      names: renameKeyNames(renames),
      canonicalTokens: renames.map((r) => Buffer.from(JSON.stringify(r.canonical), 'utf8')),
    };
    compiledCache.set(renames, compiled);
  }
  return compiled;
}

/** A reported top-level member: `name` is its index in the compiled names ({@link renameKeyNames}). */
interface Member {
  readonly name: number;
  readonly keyStart: number;
  readonly keyEnd: number;
  valueEnd: number;
}

interface Edit {
  readonly start: number;
  readonly end: number;
  readonly insert?: Buffer;
}

/**
 * Rewrites a JSON request body: for each rename, when the body is a JSON object with a top-level alias
 * member, the alias is renamed to the canonical name (only the key token's bytes change), or dropped with
 * its comma when the canonical member is also present. Nested members are left alone.
 *
 * Duplicate alias members, canonical absent: only the last one is kept (renamed), as `JSON.parse` would
 * keep the last value — renaming all of them would send the upstream duplicate canonical members.
 * Values, whitespace and every other member are preserved byte for byte. The whole body is validated
 * strictly (RFC 8259 including §8.1 UTF-8), whether it is an object or not; any other valid JSON value
 * is returned unchanged. Iterative (no recursion) and linear in the body length.
 *
 * @param renames Canonical/alias pairs of the matched route (alias table, `body` rows). Cached by identity.
 * @param body The complete request body (bytes).
 * @returns `{ body, aliasesUsed }` — `body` is the same Buffer when nothing changed.
 * @throws {ShimError} reason `body` (400) when the body is not UTF-8 JSON; the message names the problem
 *   and its byte offset.
 * @throws {Error} (not a ShimError: the core answers 500 and logs it at `error`) when the JSON scanner
 *   itself failed (a WebAssembly trap), with the trap as `cause`: the body was not judged.
 * @example
 * rewriteBody([{ canonical: 'metadata', alias: 'tags' }], Buffer.from('{"tags":{"a":1.50}}'));
 * // → { body: <'{"metadata":{"a":1.50}}'>, aliasesUsed: ['tags'] }
 */
export function rewriteBody(renames: readonly AliasRename[], body: Buffer): BodyRewriteResult {
  const { names, canonicalTokens } = compile(renames);
  const members: Member[] = [];
  const handler: ScanHandler = {
    onKey(_depth, name, keyStart, keyEnd) {
      members.push({ name, keyStart, keyEnd, valueEnd: -1 });
    },
    onValue(_depth, valueEnd) {
      members[members.length - 1]!.valueEnd = valueEnd;
    },
    onObjectEnd() {},
  };
  const error = scanJson(body, names, handler, 1);
  if (error?.failure !== undefined) {
    // The shim failed, not the client: a plain Error, which the core answers with 500 and logs at error.
    throw new Error(`rewriting the request body: ${error.message}`, { cause: error.failure });
  }
  if (error !== undefined) {
    throw new ShimError(
      'body',
      `Request body is not valid JSON: ${error.message} at byte ${error.offset}. ` +
        'Send a UTF-8 JSON text (RFC 8259).',
    );
  }
  // Members are reported at depth 1 only, so there are none unless the body is an object.
  if (members.length === 0) return { body, aliasesUsed: [] };

  const aliasesUsed: string[] = [];
  const removed = new Uint8Array(members.length);
  const edits: Edit[] = [];
  for (let k = 0; k < renames.length; k++) {
    let canonicalPresent = false;
    let lastAlias = -1;
    for (let m = 0; m < members.length; m++) {
      const name = members[m]!.name;
      if (pairOf(name) !== k) continue;
      if (!isAlias(name)) canonicalPresent = true;
      else {
        if (lastAlias >= 0) removed[lastAlias] = 1;
        lastAlias = m;
      }
    }
    if (lastAlias < 0) continue;
    aliasesUsed.push(renames[k]!.alias);
    if (canonicalPresent) {
      removed[lastAlias] = 1;
    } else {
      const member = members[lastAlias]!;
      edits.push({ start: member.keyStart, end: member.keyEnd, insert: canonicalTokens[k]! });
    }
  }

  // Drop each run of removed members that are neighbours in the object, with one comma.
  for (let m = 0; m < members.length; m++) {
    if (removed[m] === 0) continue;
    const first = members[m]!;
    while (m + 1 < members.length && removed[m + 1] === 1 && adjacent(body, members[m]!, members[m + 1]!))
      m++;
    const last = members[m]!;
    const before = skipWhitespaceBack(body, first.keyStart) - 1;
    if (body[before] === 0x2c) {
      edits.push({ start: before, end: last.valueEnd }); // `…X, "alias":v` → `…X`
    } else {
      // `{"alias":v, Y…` → `{Y…` (the object's leading whitespace stays). A member always follows a
      // dropped one at the start: the canonical member or the last alias, which are kept.
      const comma = skipWhitespace(body, last.valueEnd);
      edits.push({ start: first.keyStart, end: skipWhitespace(body, comma + 1) });
    }
  }

  if (edits.length === 0) return { body, aliasesUsed };
  edits.sort((a, b) => a.start - b.start);
  const pieces: Buffer[] = [];
  let cursor = 0;
  for (const edit of edits) {
    pieces.push(body.subarray(cursor, edit.start));
    if (edit.insert !== undefined) pieces.push(edit.insert);
    cursor = edit.end;
  }
  pieces.push(body.subarray(cursor));
  return { body: Buffer.concat(pieces), aliasesUsed };
}

/** Whether `b` is the member right after `a` in the same object (only whitespace and a comma between). */
function adjacent(text: Buffer, a: Member, b: Member): boolean {
  const comma = skipWhitespace(text, a.valueEnd);
  return text[comma] === 0x2c && skipWhitespace(text, comma + 1) === b.keyStart;
}
