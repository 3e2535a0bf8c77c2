#!/usr/bin/env bash
# Proves SPEC §10 on a throw-away copy of the tree: deleting the alias layer exactly as
# docs/removing-the-alias-layer.md says leaves a shim that type-checks and passes its remaining tests.
#
#   1. copy the tree (git's tracked files plus untracked, not ignored ones) to a temp dir; link node_modules
#   2. delete everything named aliases: src/aliases/, every folder test/**/aliases/, every file
#      test/**/aliases-*.test.ts, and bench/aliases-*.ts (bash globstar: ** is any number of folders,
#      none included); each of the four must match something
#   3. delete the two lines of src/app.ts that mention createAliasLayer (the import, the registration),
#      then let Biome format src/app.ts and check it
#   4. check that no TypeScript file in src/, test/, bench/ or scripts/ still mentions aliases/ or
#      createAliasLayer
#   5. npx tsc -p tsconfig.json; npx vitest run (the whole remaining suite)
#
# The working tree is never touched. Runs from any directory; exit code 0 means removable.
# Environment: KEEP_COPY=1 keeps the copy for inspection (its path is printed).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The node@24 devDependency's binary first, as under `npm run` (.ci/run calls this script directly).
export PATH="$root/node_modules/.bin:$PATH"

fail() {
  echo "prove-alias-removal: $*" >&2
  exit 1
}

[ -d "$root/node_modules" ] || fail "no node_modules in $root; run npm ci first"

copy="$(mktemp -d "${TMPDIR:-/tmp}/alias-removal.XXXXXX")"
if [ "${KEEP_COPY:-0}" = 1 ]; then
  trap 'echo "prove-alias-removal: copy kept at $copy"' EXIT
else
  trap 'rm -rf "$copy"' EXIT
fi
started=$SECONDS

echo "== copy the tree to $copy"
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked files (minus ones deleted in the working tree) and untracked files that are not ignored.
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do
      if [ -f "$file" ] || [ -L "$file" ]; then printf '%s\0' "$file"; fi
    done |
    tar --null --files-from=- -cf - | tar -xf - -C "$copy"
else
  tar --exclude=./node_modules --exclude=./.git --exclude=./coverage -cf - . | tar -xf - -C "$copy"
fi
ln -s "$root/node_modules" "$copy/node_modules"
cd "$copy"

echo "== delete the alias layer (docs/removing-the-alias-layer.md)"
registration="$(grep -c 'createAliasLayer' src/app.ts || true)"
[ "$registration" = 2 ] ||
  fail "src/app.ts mentions createAliasLayer on $registration lines, expected 2 (the import and the registration)"
# The paths of docs/removing-the-alias-layer.md, step 3.
shopt -s globstar
removed=()
for pattern in 'src/aliases/' 'test/**/aliases/' 'test/**/aliases-*.test.ts' 'bench/aliases-*.ts'; do
  # shellcheck disable=SC2206 # the pattern is meant to be globbed; an unmatched one stays as written
  matches=($pattern)
  [ -e "${matches[0]}" ] || fail "$pattern matches nothing: the removal steps no longer match the tree"
  removed+=("${matches[@]}")
done
printf '  %s\n' "${removed[@]}"
rm -rf -- "${removed[@]}" # -f: a file may also lie in a removed folder
sed -i.bak '/createAliasLayer/d' src/app.ts && rm src/app.ts.bak
npx biome check --write --vcs-enabled=false src/app.ts >/dev/null
diff -u "$root/src/app.ts" src/app.ts || true
npx biome check --vcs-enabled=false --diagnostic-level=error src/app.ts

echo "== nothing left that names the alias layer"
if leftovers="$(grep -rnE --include='*.ts' 'aliases/|createAliasLayer' src test bench scripts 2>/dev/null)"; then
  echo "$leftovers" >&2
  fail "TypeScript files outside the alias layer still name it (above); move them into the deleted files or decouple them"
fi

echo "== type check (tsc -p tsconfig.json)"
npx tsc -p tsconfig.json

echo "== tests without the alias layer (vitest run)"
npx vitest run

echo "== the alias layer is removable ($((SECONDS - started)) s)"
