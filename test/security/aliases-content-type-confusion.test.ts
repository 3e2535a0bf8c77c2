/**
 * Attack: content-type confusion on a rewritten route (docs/reliability.md fix 168). `Content-Type` is a
 * singleton field, but a client may send a list (`application/json, text/plain`, or two field lines,
 * which a recipient may join: RFC 9110 §5.3; Node keeps the first, fix 173), and recipients pick
 * different members (RFC 9110 §8.3): Rack's `media_type`, Werkzeug's
 * `parse_options_header` and Rails take the first. The shim took none as JSON, so a legacy client's
 * `{"tags":[…]}` reached such an upstream, which parsed it as JSON, with the deprecated name unrenamed,
 * no `Warning`, and not counted as alias use (the figure that decides when the layer can go). Now the
 * shim refuses a legacy body on a rewritten route whose `Content-Type` lists a JSON media type with
 * anything else: 400 (`hygiene`), nothing forwarded.
 *
 * The upstream is a real `node:http` server that reads the media type as Rack does (the first member of
 * the value split at `,` and `;`).
 *
 * Goes with the alias layer (`src/aliases/`): deleted with it (docs/removing-the-alias-layer.md).
 */
import http, { type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { rejected } from '../helpers/refused-upload.ts';
import { CURRENT, LEGACY, type Stack, startStack } from '../helpers/stack.ts';

let upstream: http.Server;
const received: Array<{ target: string; body: string }> = [];
let stack: Stack;
beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      received.push({ target: req.url ?? '/', body });
      // Rack 2.2 `media_type`: `content_type.split(/\s*[;,]\s*/, 2).first.downcase`.
      const mediaType = (req.headers['content-type'] ?? '').split(/\s*[;,]\s*/)[0]?.toLowerCase();
      const parsed = mediaType === 'application/json' ? JSON.parse(body) : null;
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ parsed }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  stack = await startStack({ UPSTREAM_URL: `http://127.0.0.1:${port}`, LOG_LEVEL: 'warn' });
});
afterAll(async () => {
  await stack.close();
  await new Promise((resolve) => upstream.close(resolve));
});

const hygieneRejections = () => rejected(stack, 'hygiene');

const BODY = '{"name":"m","tags":["a"]}';

describe('a legacy JSON body under a Content-Type that lists several media types', () => {
  it.each([
    'application/json, text/plain',
    'application/json,',
    'application/json ,x',
    'application/json; charset=utf-8, text/plain',
    'text/plain, application/json',
  ])('%j: the shim 400, nothing upstream', async (contentType) => {
    const before = received.length;
    const rejections = await hygieneRejections();
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': contentType },
      BODY,
    );
    expect(reply.status).toBe(400);
    expect(reply.json()).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(reply.json<{ message: string }>().message).toContain('names several media types');
    expect(received.length).toBe(before);
    expect(await hygieneRejections()).toBe(rejections + 1);
  });
});

describe('a legacy JSON body under two Content-Type field lines (fix 173)', () => {
  // Node's parsed view keeps the first line and drops the second: the shim judged `application/json`
  // alone, renamed the body and sent the upstream one line, while a recipient that joins the lines
  // (RFC 9110 §5.3) or takes the last one (a front proxy, another framework) reads a list or text/plain.
  /** A legacy client's headers with one `Content-Type` field line per element (Node's types say string). */
  const withLines = (lines: string[]) =>
    ({ ...LEGACY, 'content-type': lines }) as unknown as OutgoingHttpHeaders;
  it.each([
    [['application/json', 'text/plain']],
    [['text/plain', 'application/json']],
    [['application/json', 'application/json; charset=utf-8']],
  ])('%j: the shim 400, as for the folded list, nothing upstream', async (lines) => {
    const before = received.length;
    const rejections = await hygieneRejections();
    const reply = await send(stack.url, 'POST', '/missions', withLines(lines), BODY);
    expect(reply.status).toBe(400);
    expect(reply.json<{ message: string }>().message).toContain('names several media types');
    expect(received.length).toBe(before);
    expect(await hygieneRejections()).toBe(rejections + 1);
  });

  it('the same media type twice is one: renamed', async () => {
    const lines = ['application/json', 'application/json'];
    const reply = await send(stack.url, 'POST', '/missions', withLines(lines), BODY);
    expect(reply.status).toBe(201);
    expect(received.at(-1)?.body).toBe('{"name":"m","metadata":["a"]}');
  });
});

describe('what stays as it was', () => {
  it('one JSON media type, a comma inside a quoted parameter: renamed', async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': 'application/json; x="a,b"' },
      BODY,
    );
    expect(reply.status).toBe(201);
    expect(received.at(-1)?.body).toBe('{"name":"m","metadata":["a"]}');
  });

  it('a list without JSON in it goes as sent (not a JSON body: nothing to rename)', async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': 'text/plain, text/csv' },
      BODY,
    );
    expect(reply.status).toBe(201);
    expect(received.at(-1)?.body).toBe(BODY);
  });

  it('a current client’s request goes as sent: no alias layer for it', async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...CURRENT, 'content-type': 'application/json, text/plain' },
      BODY,
    );
    expect(reply.status).toBe(201);
    expect(received.at(-1)?.body).toBe(BODY);
  });

  it('a list on a route without body aliases goes as sent', async () => {
    const reply = await send(
      stack.url,
      'POST',
      '/other',
      { ...LEGACY, 'content-type': 'application/json, text/plain' },
      BODY,
    );
    expect(reply.status).toBe(201);
  });
});
