/**
 * Test helpers for the alias layer: a JSON tree generator biased towards alias and canonical keys, a
 * serializer that varies whitespace, escapes and number spellings (so byte-faithfulness is exercised),
 * and reference models written with JSON.parse.
 */
import fc from 'fast-check';
import { vi } from 'vitest';
import type { AliasRename } from '../../../src/aliases/table.ts';

/** A number written exactly as given (e.g. `12345678901234567890`, `1.50`). */
export class RawNumber {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

/** An object as a member list, so that duplicate keys and key order are explicit. */
export class Obj {
  readonly members: Member[];
  constructor(members: Member[]) {
    this.members = members;
  }
}

export type Tree = null | boolean | number | string | RawNumber | Obj | Tree[];
export type Member = { key: string; value: Tree };

/** Small deterministic PRNG (mulberry32), seeded by fast-check. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const RAW_NUMBERS = ['12345678901234567890', '1.50', '-0.0', '1E+2', '0e-7', '-12.5e3', '100'];

export const treeArbitrary = (keys: readonly string[]): fc.Arbitrary<Tree> => {
  const key = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...keys) },
    { weight: 2, arbitrary: fc.string({ maxLength: 6 }) },
  );
  const leaf = fc.oneof(
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => (x === 0 ? 0 : x)),
    fc.string({ maxLength: 8, unit: 'grapheme' }),
    fc.constantFrom(...RAW_NUMBERS).map((t) => new RawNumber(t)),
  );
  const { tree } = fc.letrec<{ tree: Tree; array: Tree[]; object: Obj }>((tie) => ({
    tree: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
    array: fc.array(tie('tree'), { maxLength: 4 }),
    object: fc.array(fc.record({ key, value: tie('tree') }), { maxLength: 5 }).map((m) => new Obj(m)),
  }));
  return tree;
};

/** An object at the top level with members drawn from `keys` (duplicates allowed). */
export const objectArbitrary = (keys: readonly string[]): fc.Arbitrary<Obj> =>
  fc
    .array(fc.record({ key: fc.constantFrom(...keys, 'other', 'x'), value: treeArbitrary(keys) }), {
      maxLength: 8,
    })
    .map((m) => new Obj(m));

/** Writes a JSON string with some code points escaped as `\uXXXX`. */
function writeString(text: string, rand: () => number): string {
  let out = '"';
  for (const cp of text) {
    if (rand() < 0.2) {
      for (let k = 0; k < cp.length; k++) out += `\\u${cp.charCodeAt(k).toString(16).padStart(4, '0')}`;
    } else {
      out += JSON.stringify(cp).slice(1, -1);
    }
  }
  return `${out}"`;
}

function writeNumber(n: number, rand: () => number): string {
  const text = String(n);
  if (!Number.isInteger(n) || Math.abs(n) >= 1e15) return text;
  const r = rand();
  if (r < 0.1) return `${text}.0`;
  if (r < 0.2) return `${text}e0`;
  if (r < 0.25) return `${text}E+0`;
  return text;
}

const WHITESPACE = ['', '', '', ' ', '\n', '\t', '\r\n  '];
const ws = (rand: () => number) => WHITESPACE[Math.floor(rand() * WHITESPACE.length)]!;

/** Serializes a tree with random whitespace, escapes and number spellings (valid JSON every time). */
export function serialize(tree: Tree, rand: () => number): string {
  // Iterative, like the code under test, so deep trees serialize too.
  const out: string[] = [];
  const stack: Array<Tree | { close: string }> = [tree];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node !== null && typeof node === 'object' && 'close' in node && !(node instanceof Obj)) {
      out.push(node.close);
    } else if (node === null || typeof node === 'boolean') {
      out.push(String(node));
    } else if (typeof node === 'number') {
      out.push(writeNumber(node, rand));
    } else if (typeof node === 'string') {
      out.push(writeString(node, rand));
    } else if (node instanceof RawNumber) {
      out.push(node.text);
    } else if (node instanceof Obj) {
      const pieces: Array<Tree | { close: string }> = [];
      node.members.forEach((m, k) => {
        pieces.push({
          close: `${k === 0 ? ws(rand) : `${ws(rand)},${ws(rand)}`}${writeString(m.key, rand)}${ws(rand)}:${ws(rand)}`,
        });
        pieces.push(m.value);
      });
      out.push('{');
      stack.push({ close: `${ws(rand)}}` }, ...pieces.reverse());
    } else {
      const pieces: Array<Tree | { close: string }> = [];
      node.forEach((v, k) => {
        pieces.push({ close: k === 0 ? ws(rand) : `${ws(rand)},${ws(rand)}` }, v);
      });
      out.push('[');
      stack.push({ close: `${ws(rand)}]` }, ...pieces.reverse());
    }
  }
  return out.join('');
}

/**
 * Reference model of the response patch, on `JSON.parse` output: every object that has a canonical
 * key and not its alias gets the alias with a copy of the (patched) canonical value, right after it.
 */
export function addAliases(value: unknown, pairs: readonly AliasRename[]): unknown {
  if (Array.isArray(value)) return value.map((v) => addAliases(v, pairs));
  if (value === null || typeof value !== 'object') return value;
  const entries: Array<[string, unknown]> = [];
  const own = (k: string) => Object.hasOwn(value, k);
  for (const [k, v] of Object.entries(value)) {
    const patched = addAliases(v, pairs);
    entries.push([k, patched]);
    for (const pair of pairs) {
      if (k === pair.canonical && !own(pair.alias)) entries.push([pair.alias, patched]);
    }
  }
  return Object.fromEntries(entries);
}

/** Reference model of the body rewrite on a member list. */
export function renameMembers(object: Obj, renames: readonly AliasRename[]): Obj {
  let result = object.members;
  for (const { canonical, alias } of renames) {
    const hasCanonical = result.some((m) => m.key === canonical);
    const lastAlias = result.findLastIndex((m) => m.key === alias);
    result = result.flatMap((m, k) => {
      if (m.key !== alias) return [m];
      if (hasCanonical || k !== lastAlias) return [];
      return [{ key: canonical, value: m.value }];
    });
  }
  return new Obj(result);
}

/** Removes the pieces a patch inserted, given their upstream offsets and lengths. */
export function cutInserted(
  patched: Buffer,
  insertions: ReadonlyArray<{ offset: number; length: number }>,
): Buffer {
  const pieces: Buffer[] = [];
  let shift = 0;
  let cursor = 0;
  for (const { offset, length } of [...insertions].sort((a, b) => a.offset - b.offset)) {
    pieces.push(patched.subarray(cursor, offset + shift));
    cursor = offset + shift + length;
    shift += length;
  }
  pieces.push(patched.subarray(cursor));
  return Buffer.concat(pieces);
}

/** Key order and values of a parsed object, for comparisons that care about order. */
export const entriesOf = (text: string | Buffer): Array<[string, unknown]> =>
  Object.entries(JSON.parse(text.toString()) as object);

/**
 * Makes the next WebAssembly `memory.grow` throw `refused`, as an instance whose memory cannot grow
 * does (`RangeError: WebAssembly.Memory.grow(): Maximum memory size exceeded`); later calls grow as
 * usual. Restore the returned spy (`mockRestore`) when done.
 * @param refused What the call throws.
 * @returns The spy on `WebAssembly.Memory.prototype.grow`.
 */
export function refuseNextMemoryGrow(refused: Error) {
  // TypeScript declares the WebAssembly API only in its DOM library.
  const { Memory } = (
    globalThis as unknown as { WebAssembly: { Memory: { prototype: { grow(pages: number): number } } } }
  ).WebAssembly;
  return vi.spyOn(Memory.prototype, 'grow').mockImplementationOnce(() => {
    throw refused;
  });
}
