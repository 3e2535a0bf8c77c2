/**
 * The key names the scanner compares for a list of renames (canonical/alias pairs), shared by the body
 * rewrite and the response patch: name `2k` is the canonical of rename `k`, name `2k + 1` its alias.
 * The helpers below are the only places that encoding is written; they are small enough for V8 to
 * inline on the patch's per-member path.
 */
import { KeyNames } from './json-scan.ts';
import type { AliasRename } from './table.ts';

/**
 * The scanner's names for `renames`, canonical then alias per rename (see the module comment).
 * Callers compile it once per renames array (their own cache, beside their encoded tokens).
 * @param renames Canonical/alias pairs, e.g. a route's `body` rows or the `response` pairs.
 * @returns The {@link KeyNames} to scan with.
 * @throws {Error} from {@link KeyNames} when a name repeats or the names are too many or too long.
 * @example renameKeyNames([{ canonical: 'metadata', alias: 'tags' }]) // names: metadata = 0, tags = 1
 */
export function renameKeyNames(renames: readonly AliasRename[]): KeyNames {
  return new KeyNames(renames.flatMap((r) => [r.canonical, r.alias]));
}

/**
 * Whether a reported name is an alias (odd) rather than a canonical name (even).
 * @param name A reported name's index in {@link renameKeyNames}'s names.
 * @returns `true` for an alias.
 * @throws Nothing.
 * @example isAlias(1) // → true (the alias of rename 0)
 */
export function isAlias(name: number): boolean {
  return (name & 1) === 1;
}

/**
 * The index in the renames of the pair a reported name belongs to.
 * @param name A reported name's index in {@link renameKeyNames}'s names.
 * @returns The rename's index (`name` halved, rounded down).
 * @throws Nothing.
 * @example pairOf(3) // → 1 (the alias of rename 1)
 */
export function pairOf(name: number): number {
  return name >> 1;
}
