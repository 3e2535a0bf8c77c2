/**
 * Writes docs/configuration.md from the composed configuration schema: the core's variables and each
 * registered plugin's (`npm run docs:config`). `test/unit/config.test.ts` fails when the committed page
 * is stale.
 */
import { writeFileSync } from 'node:fs';
import { PLUGINS } from '../src/app.ts';
import { renderConfigurationDoc } from '../src/config.ts';

const target = new URL('../docs/configuration.md', import.meta.url);
writeFileSync(target, renderConfigurationDoc(PLUGINS));
process.stdout.write(`wrote ${target.pathname}\n`);
