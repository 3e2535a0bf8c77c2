/**
 * The request examples of docs/migration-guide.md run as shown (docs audit, 2026-11-26): client authors
 * copy them, so each "Before" must be admitted by the shim and the reference backend behind it (the demo
 * of `npm start`), and each "After" by the backend alone — the sunset's state. The guide once showed
 * members and parameters the backend refuses (`name` on `POST /missions/:uuid/metadata` and `PUT
 * /projects/:uuid/metadata-types`, `take` on `POST /projects/:uuid/metadata-types`), a mission's UUID
 * as a project's and a `POST /missions` without its project: 5 of 7 failed.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { CURRENT, LEGACY, startStack } from '../helpers/stack.ts';

const guide = readFileSync(new URL('../../docs/migration-guide.md', import.meta.url), 'utf8');

/** One request of an ```http block: request line, header lines, body. */
interface Example {
  method: string;
  target: string;
  headers: Record<string, string>;
  body: string | undefined;
}

function parseExample(block: string): Example {
  const [head = '', body] = block.split('\n\n');
  const [requestLine = '', ...lines] = head.split('\n');
  const [method = '', target = ''] = requestLine.split(' ');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { method, target, headers, body: body?.trim() || undefined };
}

/** Each section of the guide that shows requests: its title, its "Before" and its "After". */
const sections = guide
  .split('\n### ')
  .slice(1)
  .map((text) => {
    const blocks = [...text.matchAll(/```http\n([\s\S]*?)\n```/g)].map((m) => parseExample(m[1] ?? ''));
    return { title: text.slice(0, text.indexOf('\n')), before: blocks[0], after: blocks[1] };
  })
  .filter((s) => s.before !== undefined && s.after !== undefined);

describe('docs/migration-guide.md request examples', () => {
  it('show every request row of the alias table', () => {
    expect(sections).toHaveLength(7);
  });

  it.each(sections)(
    '$title: "Before" works through the shim, "After" against the backend alone',
    async ({ before, after }) => {
      const stack = await startStack();
      try {
        const legacy = await send(
          stack.url,
          before!.method,
          before!.target,
          { ...LEGACY, ...before!.headers },
          before!.body,
        );
        expect(legacy.status, legacy.text).toBeLessThan(300);
        const canonical = await send(
          stack.upstreamUrl,
          after!.method,
          after!.target,
          { ...CURRENT, ...after!.headers },
          after!.body,
        );
        expect(canonical.status, canonical.text).toBeLessThan(300);
      } finally {
        await stack.close();
      }
    },
  );
});
