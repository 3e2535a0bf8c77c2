/**
 * Writes docs/configuration.md from the composed configuration schema: the core's variables and each
 * registered plugin's (`npm run docs:config`). `test/unit/config.test.ts` fails when the committed page
 * is stale. The page's prose lives here, not in the runtime's configuration module.
 */
import { writeFileSync } from 'node:fs';
import { PLUGINS } from '../src/app.ts';
import { CORE_VARIABLES, type PluginDefinition, type VariableSpecs } from '../src/config.ts';

/**
 * Renders `docs/configuration.md` from the composed schema: the core's table, then one table per
 * plugin, then the unknown-variable rule. `npm run docs:config` writes it; a unit test fails when the
 * committed page differs.
 * @param plugins The registered plugins (`app.ts`'s `PLUGINS`).
 * @returns Markdown text ending in a newline.
 */
export function renderConfigurationDoc(plugins: readonly PluginDefinition[]): string {
  const table = (specs: VariableSpecs) => [
    '| variable | default | meaning |',
    '|---|---|---|',
    ...Object.entries(specs).map(
      ([name, spec]) =>
        `| \`${name}\` | ${spec.default === undefined ? 'unset' : `\`${spec.default}\``} | ${spec.meaning} |`,
    ),
  ];
  const lines = [
    '# Configuration',
    '',
    "<!-- Generated from the configuration schema (src/config.ts and each plugin's) by `npm run docs:config`; do not edit. -->",
    '',
    'The shim reads its whole configuration from environment variables, once, at start (`src/config.ts`,',
    'the only reader of `process.env` at run time). An invalid value stops the process before it listens:',
    'one line per problem on stderr, `config error: <VARIABLE>: <what is wrong>`, and exit code 1. An empty',
    "value counts as unset. Every invalid variable is reported at once; a plugin's rules between its",
    'variables (such as one date not before another) are checked once each of its variables is valid, so',
    'fixing one line can reveal another.',
    '',
    "The schema is composed: the core's variables below, then the variables each registered plugin",
    'declares in its own folder (`app.ts` lists the plugins in one line). This page is generated from that',
    'schema; `test/unit/config.test.ts` fails when it is stale, and checks that every default shown here',
    'gives the same configuration as leaving the variable unset.',
    '',
    '## Core',
    '',
    ...table(CORE_VARIABLES),
    '',
  ];
  for (const plugin of plugins) {
    lines.push(
      `## Plugin \`${plugin.name}\``,
      '',
      plugin.description,
      '',
      ...table(plugin.config.variables),
      '',
    );
  }
  lines.push(
    '## Unknown variables',
    '',
    "A variable whose name looks like the shim's (upper snake case, e.g. `FOO_BAR`) but that neither the",
    'core nor a registered plugin reads is named in one start-up warning (`level: 40`, `environment',
    'variables not read by this shim …`), not silently ignored and not an error: typically a variable of a',
    'plugin that has been deleted, or a typo. Platform variables (shell, locale, Node and npm, Kubernetes',
    'service links such as `<SVC>_SERVICE_HOST` and `<SVC>_PORT_<n>_TCP…`, CI runners, proxies, CA bundles',
    'and language toolchains of base images and developer machines such as `SSL_CERT_FILE`, `GIT_SSL_CAINFO`,',
    "`NIX_SSL_CERT_FILE`, `PYTHONUNBUFFERED` or `RUSTUP_…`, and the C library's `MALLOC_…` and `GLIBC_…`,",
    'which the image sets itself) are not reported',
    '(`AMBIENT_VARIABLES` in `src/config.ts`). A name at most two edits from one the shim reads is named',
    'with it: `LOG_LEVL (did you mean LOG_LEVEL?)`; when the configuration fails, such near misses are also',
    'listed among the `config error` lines (`UPSTREM_URL: not read by this shim; did you mean',
    'UPSTREAM_URL?`). Remove the variable from the deployment to silence it.',
    '',
    'Example (the sidecar of `deploy/kubernetes.yaml` outside a container: the core variables it sets are',
    'these and defaults; the plugin variables it sets are left out. `npm start` is the demo, which falls',
    'back to the embedded backend when `UPSTREAM_URL` is unset or misspelt):',
    '',
    '```sh',
    'npm run build',
    'UPSTREAM_URL=http://127.0.0.1:3000 ADMIN_PORT=9090 LOG_LEVEL=info \\',
    '  node --max-semi-space-size=2 --scavenger-max-new-space-capacity-mb=4 --max-old-space-size=256 dist/main.js',
    '```',
    '',
  );
  return lines.join('\n');
}

if (import.meta.main) {
  const target = new URL('../docs/configuration.md', import.meta.url);
  writeFileSync(target, renderConfigurationDoc(PLUGINS));
  process.stdout.write(`wrote ${target.pathname}\n`);
}
