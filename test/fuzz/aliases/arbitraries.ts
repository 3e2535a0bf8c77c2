/**
 * Shared generators and oracles for fuzzing the alias layer (goes with `src/aliases/` at 1.0).
 */
import fc from 'fast-check';
import { random, serialize, treeArbitrary } from '../../unit/aliases/helpers.ts';

/** Bytes that matter to a JSON scanner, plus invalid UTF-8 lead and continuation bytes. */
const INTERESTING = [...'{}[]",:\\ \t\n0-1.eE+utfnal"']
  .map((c) => c.charCodeAt(0))
  .concat([0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xe0, 0xed, 0xef, 0xf4, 0xf5, 0xff]);

/** A byte edit: delete, insert or replace at a relative position. */
type Edit = { kind: 'delete' | 'insert' | 'replace'; at: number; byte: number };

const edit: fc.Arbitrary<Edit> = fc.record({
  kind: fc.constantFrom('delete', 'insert', 'replace'),
  at: fc.double({ min: 0, max: 1, noNaN: true }),
  byte: fc.oneof(fc.constantFrom(...INTERESTING), fc.integer({ min: 0, max: 255 })),
});

function applyEdits(body: Buffer, edits: readonly Edit[]): Buffer {
  const bytes = [...body];
  for (const e of edits) {
    const i = Math.min(bytes.length, Math.floor(e.at * (bytes.length + 1)));
    if (e.kind === 'insert') bytes.splice(i, 0, e.byte);
    else if (bytes.length > 0) {
      const j = Math.min(i, bytes.length - 1);
      if (e.kind === 'delete') bytes.splice(j, 1);
      else bytes[j] = e.byte;
    }
  }
  return Buffer.from(bytes);
}

/** Valid JSON texts built from trees biased towards `keys`, serialized with varied whitespace and escapes. */
export const jsonText = (keys: readonly string[]): fc.Arbitrary<string> =>
  fc.tuple(treeArbitrary(keys), fc.integer()).map(([tree, seed]) => serialize(tree, random(seed)));

/** Valid JSON with up to four byte edits: mostly near-valid, sometimes still valid. */
export const mutatedJson = (keys: readonly string[]): fc.Arbitrary<Buffer> =>
  fc
    .tuple(jsonText(keys), fc.array(edit, { minLength: 1, maxLength: 4 }))
    .map(([text, edits]) => applyEdits(Buffer.from(text), edits));

/** Any bytes: raw, mutated JSON, or a JSON prefix followed by noise. */
export const anyBody = (keys: readonly string[]): fc.Arbitrary<Buffer> =>
  fc.oneof(
    fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
    mutatedJson(keys),
    fc
      .tuple(jsonText(keys), fc.nat(), fc.uint8Array({ maxLength: 16 }))
      .map(([t, cut, noise]) => Buffer.concat([Buffer.from(t.slice(0, cut % (t.length + 1))), noise])),
  );

/**
 * Builds the value of a JSON text already known to be valid, without `JSON.parse` on objects: Node 24's
 * V8 decodes an escaped object key through a cached map transition when its raw source matches one
 * seen before: once a text with the key `\` (`{"\\":0}`) was parsed, `{"\u0041":1}` can come back
 * with the key `\` instead of `A`
 * (nodejs/node#63785, V8 issue 521080746). Strings and numbers still go through `JSON.parse` as
 * top-level values, which that bug does not touch. Keys keep `JSON.parse` semantics: own data
 * properties (also `__proto__`), and a repeated key keeps its first position and its last value.
 * @param text A valid JSON text.
 * @returns The value `JSON.parse(text)` should return.
 */
export function parseJson(text: string): unknown {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text.charAt(i))) i++;
  };
  const stringToken = (): string => {
    const start = i++;
    while (text.charAt(i) !== '"') i += text.charAt(i) === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (): unknown => {
    ws();
    const c = text.charAt(i);
    if (c === '{') {
      i++;
      const object: Record<string, unknown> = {};
      ws();
      if (text.charAt(i) === '}') {
        i++;
        return object;
      }
      for (;;) {
        ws();
        const key = stringToken();
        ws();
        i++; // ':'
        Object.defineProperty(object, key, {
          value: value(),
          enumerable: true,
          writable: true,
          configurable: true,
        });
        ws();
        if (text.charAt(i++) === '}') return object;
      }
    }
    if (c === '[') {
      i++;
      const array: unknown[] = [];
      ws();
      if (text.charAt(i) === ']') {
        i++;
        return array;
      }
      for (;;) {
        array.push(value());
        ws();
        if (text.charAt(i++) === ']') return array;
      }
    }
    if (c === '"') return stringToken();
    const start = i;
    while (i < text.length && !',]} \t\n\r'.includes(text.charAt(i))) i++;
    return JSON.parse(text.slice(start, i));
  };
  return value();
}

/**
 * The oracle of RFC 8259 validity: strict UTF-8 (no lone surrogates, a BOM kept and so rejected by
 * `JSON.parse`), then `JSON.parse` for the grammar, and {@link parseJson} for the value.
 * @returns `{ valid, value }`; `value` is absent when the bytes are not a JSON text.
 */
export function parseStrict(body: Buffer): { valid: boolean; value?: unknown } {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(body);
    JSON.parse(text);
  } catch {
    return { valid: false };
  }
  return { valid: true, value: parseJson(text) };
}
