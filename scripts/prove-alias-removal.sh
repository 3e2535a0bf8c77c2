#!/usr/bin/env bash
# Proves SPEC §10 and issue 11 item 6 on a throw-away copy of the tree: deleting the alias layer exactly
# as docs/removing-the-alias-layer.md says leaves a shim that type-checks, passes its remaining tests, and
# takes its configuration with it.
#
#   1. copy the tree (git's tracked files plus untracked, not ignored ones) to a temp dir; link node_modules
#   2. read the layer's variables from its own schema (src/aliases/config.ts) before deleting it
#   3. delete everything named aliases: src/aliases/, every folder test/**/aliases/, every file
#      test/**/aliases-*.test.ts, bench/aliases-*.ts and docs/migration-guide.md (bash globstar: ** is
#      any number of folders, none included); each pattern must match something
#   4. delete the two lines of src/app.ts that mention aliasPlugin (the import, the registration in
#      PLUGINS), then let Biome format src/app.ts and check it; drop the `docs:aliases` npm script;
#      delete this script and the two lines of .ci/run that run it
#   5. delete the dashboard's alias-layer row; delete the layer's variables from deploy/*.yaml;
#      regenerate docs/configuration.md (npm run docs:config)
#   6. check that no TypeScript file in src/, test/, bench/ or scripts/ still mentions aliases/ or
#      aliasPlugin; that no variable of the layer is named in src/ (a core comment included); and that
#      none is left in docs/configuration.md or deploy/*.yaml
#   7. npx tsc -p tsconfig.json
#   8. start the shim (node src/main.ts) with every variable of the layer still set: the start log must
#      name each of them in a warning, list no plugin, and say nothing else of aliases
#   9. npx vitest run (the whole remaining suite)
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
# The reference backend's build output (ignored by git, made by `npm ci`): demo mode and its own tests need it.
[ -d "$root/reference-backend/dist" ] || fail "no reference-backend/dist in $root; run npm ci first"
[ -e "$copy/reference-backend/dist" ] || ln -s "$root/reference-backend/dist" "$copy/reference-backend/dist"
cd "$copy"

echo "== the layer's variables, from its own schema"
# shellcheck disable=SC2207 # names are upper snake case, no spaces
retired=($(node --input-type=module -e \
  "const m = await import('./src/aliases/config.ts'); console.log(Object.keys(m.ALIAS_VARIABLES).join(' '))"))
[ "${#retired[@]}" -gt 0 ] || fail "src/aliases/config.ts declares no variables"
echo "  ${retired[*]}"

echo "== delete the alias layer (docs/removing-the-alias-layer.md)"
registration="$(grep -c 'aliasPlugin' src/app.ts || true)"
[ "$registration" = 2 ] ||
  fail "src/app.ts mentions aliasPlugin on $registration lines, expected 2 (the import and the registration)"
# The paths of docs/removing-the-alias-layer.md, step 4.
shopt -s globstar
removed=()
for pattern in 'src/aliases/' 'test/**/aliases/' 'test/**/aliases-*.test.ts' 'bench/aliases-*.ts' 'docs/migration-guide.md'; do
  # shellcheck disable=SC2206 # the pattern is meant to be globbed; an unmatched one stays as written
  matches=($pattern)
  [ -e "${matches[0]}" ] || fail "$pattern matches nothing: the removal steps no longer match the tree"
  removed+=("${matches[@]}")
done
printf '  %s\n' "${removed[@]}"
rm -rf -- "${removed[@]}" # -f: a file may also lie in a removed folder
sed -i.bak '/aliasPlugin/d' src/app.ts && rm src/app.ts.bak
npx biome check --write --vcs-enabled=false src/app.ts >/dev/null
diff -u "$root/src/app.ts" src/app.ts || true
npx biome check --vcs-enabled=false --diagnostic-level=error src/app.ts
npm pkg delete scripts.docs:aliases
# This proof and its step in .ci/run go too: once the layer is deleted, it has nothing left to delete.
[ "$(grep -c 'prove-alias-removal' .ci/run || true)" = 2 ] ||
  fail ".ci/run names prove-alias-removal on other than two lines (the step's title and its command)"
rm scripts/prove-alias-removal.sh
sed -i.bak '/prove-alias-removal/d' .ci/run && rm .ci/run.bak
bash -n .ci/run

echo "== the layer's dashboard row, deployment variables and configuration docs"
node --input-type=module -e "
  import { readFileSync, writeFileSync } from 'node:fs';
  const file = 'deploy/grafana/compat-shim.json';
  const d = JSON.parse(readFileSync(file, 'utf8'));
  const start = d.panels.findIndex((p) => p.type === 'row' && p.title.startsWith('Alias layer'));
  if (start < 0) throw new Error('no Alias layer row in ' + file);
  const next = d.panels.findIndex((p, i) => i > start && p.type === 'row');
  d.panels.splice(start, (next < 0 ? d.panels.length : next) - start);
  writeFileSync(file, JSON.stringify(d, null, 2) + '\n');
"
for name in "${retired[@]}"; do
  # Kubernetes: '- name: X' and its 'value:' line; compose: 'X: value'.
  sed -i.bak -E "/^ *- name: ${name}\$/{N;d;}; /^ *${name}: /d" deploy/*.yaml && rm deploy/*.yaml.bak
done
npm run --silent docs:config >/dev/null
git diff --no-index --stat "$root/docs/configuration.md" docs/configuration.md || true

echo "== nothing left that names the alias layer"
if leftovers="$(grep -rnE --include='*.ts' 'aliases/|aliasPlugin' src test bench scripts 2>/dev/null)"; then
  echo "$leftovers" >&2
  fail "TypeScript files outside the alias layer still name it (above); move them into the deleted files or decouple them"
fi
# The core's code names none of the layer's variables: what is left would describe a setting that no
# longer exists (e.g. a comment on the buffer budget that names MAX_PATCH_VALUE). The prose docs
# (README.md, docs/operations.md …) describe the layer's operation too; removing-the-alias-layer.md
# lists the passages to delete with it, so they are not checked here.
variables="$(IFS='|'; echo "${retired[*]}")"
if leftovers="$(grep -rnwE "$variables" src 2>/dev/null)"; then
  echo "$leftovers" >&2
  fail "the core's code (src/) still names a variable of the alias layer (above): reword it or move it into the deleted files"
fi
for name in "${retired[@]}"; do
  if grep -qw "$name" docs/configuration.md deploy/*.yaml; then
    fail "$name is still in docs/configuration.md or deploy/*.yaml after the removal"
  fi
done

echo "== type check (tsc -p tsconfig.json)"
npx tsc -p tsconfig.json

echo "== start-up with the layer's variables still set: named in a warning, not silently ignored"
env_args=()
for name in "${retired[@]}"; do env_args+=("$name=on"); done
startlog="$copy/start.log"
env -i PATH="$PATH" HOME="${HOME:-/tmp}" UPSTREAM_URL=http://127.0.0.1:9 PORT=0 ADMIN_PORT=0 HOST=127.0.0.1 \
  "${env_args[@]}" node src/main.ts >"$startlog" 2>&1 &
shim_pid=$!
for _ in $(seq 1 200); do
  grep -q '"msg":"compat-shim listening"' "$startlog" && break
  kill -0 "$shim_pid" 2>/dev/null || break
  sleep 0.1
done
kill "$shim_pid" 2>/dev/null || true
wait "$shim_pid" 2>/dev/null || true
cat "$startlog"
grep -q '"msg":"compat-shim listening"' "$startlog" || fail "the shim did not start without the alias layer"
warning="$(grep '"level":40' "$startlog" | grep 'not read by this shim' || true)"
[ -n "$warning" ] || fail "no start-up warning names the retired variables"
for name in "${retired[@]}"; do
  grep -qw "$name" <<<"$warning" || fail "the start-up warning does not name $name"
done
grep '"msg":"compat-shim listening"' "$startlog" | grep -q '"plugins":\[\]' ||
  fail "the start log still lists a plugin"
if grep -v 'not read by this shim' "$startlog" | grep -qi 'alias'; then
  fail "the start log still mentions aliases outside the warning"
fi

echo "== tests without the alias layer (vitest run)"
npx vitest run

echo "== the alias layer is removable ($((SECONDS - started)) s)"
