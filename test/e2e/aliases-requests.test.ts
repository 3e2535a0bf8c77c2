/**
 * Request rewrites end to end, at the byte level (SPEC §5): a raw upstream records exactly what the shim
 * forwards, so renamed bodies and queries can be compared byte for byte — numbers beyond 2^53, `1.50`,
 * whitespace and member order included — and framing (Content-Length after a rewrite, chunked uploads)
 * can be checked. The limits (malformed JSON → 400, over MAX_REWRITE_BODY → 413) are the shim's own
 * answers: the upstream never sees those requests.
 *
 * Delete this file with `src/aliases/` at 1.0 (docs/removing-the-alias-layer.md).
 */
import http from 'node:http';
import zlib from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { injectScanFailure } from '../../src/aliases/json-scan.ts';
import { DECODE_SYNC, ENCODE_SYNC } from '../helpers/codings.ts';
import { type Reply, send, sendRawUntilClose, statusesIn } from '../helpers/http.ts';
import { jsonResponse, type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { LEGACY, type Stack, startStack } from '../helpers/stack.ts';

const UUID = 'c0000000-0000-4000-8000-000000000001';
const OPEN_PROJECT = 'b0000000-0000-4000-8000-000000000002';
const WEATHER = 'a0000000-0000-4000-8000-000000000003';

/** One request as the upstream received it. */
interface Forwarded {
  requestLine: string;
  /** Header lines, lower-cased names. */
  headers: Record<string, string>;
  /** Body bytes exactly as received (latin1). */
  body: string;
}

function parseForwarded(received: string): Forwarded {
  const headEnd = received.indexOf('\r\n\r\n');
  const [requestLine = '', ...lines] = received.slice(0, headEnd).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { requestLine, headers, body: received.slice(headEnd + 4) };
}

/** Whether `received` holds a complete request (Content-Length or chunked framing). */
function complete(received: string): boolean {
  const headEnd = received.indexOf('\r\n\r\n');
  if (headEnd === -1) return false;
  const head = received.slice(0, headEnd).toLowerCase();
  const body = received.slice(headEnd + 4);
  if (/\r\ntransfer-encoding: *chunked/.test(head)) return body.endsWith('0\r\n\r\n');
  const length = /\r\ncontent-length: *(\d+)/.exec(head);
  return Buffer.byteLength(body, 'latin1') >= Number(length?.[1] ?? 0);
}

/** Sends a JSON body with `Transfer-Encoding: chunked`, one write per piece, in separate ticks. */
function sendChunked(base: string, method: string, path: string, pieces: string[]): Promise<Reply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        agent: false,
        headers: { ...LEGACY, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body,
            text: body.toString('utf8'),
            json: <T>() => JSON.parse(body.toString('utf8')) as T,
          });
        });
      },
    );
    req.on('error', reject);
    req.flushHeaders();
    let n = 0;
    const next = () => {
      if (n === pieces.length) {
        req.end();
        return;
      }
      req.write(pieces[n++]);
      setTimeout(next, 5);
    };
    next();
  });
}

const postJson = (base: string, path: string, body: string, method = 'POST') =>
  send(base, method, path, { ...LEGACY, 'content-type': 'application/json' }, body);

describe('what reaches the upstream (raw upstream)', () => {
  let raw: RawUpstream;
  let stack: Stack;
  beforeAll(async () => {
    raw = await startRawUpstream((socket, received) => {
      if (complete(received)) socket.end(jsonResponse('{}', 'Connection: close\r\n'));
    });
    stack = await startStack({ UPSTREAM_URL: raw.url, MAX_REWRITE_BODY: '1kb' });
  });
  afterAll(async () => {
    await stack.close();
    await raw.close();
  });
  const last = () => parseForwarded(raw.received.at(-1) ?? '');

  it('renames only the key: integers above 2^53, 1.50, exponents, escapes and whitespace survive', async () => {
    const values =
      '{ "b0000000-0000-4000-8000-000000000001" : 12345678901234567890123, "x": 1.50, "y": -0.0, ' +
      '"z": 1E-7, "s": "\\u00e9\\ud83d\\ude00 tags" }';
    const sent = `{\n  "name": "n",\t"tags" :${values},\n  "projectUUID": "${OPEN_PROJECT}"\n}`;
    const reply = await postJson(stack.url, '/missions', sent);
    expect(reply.status).toBe(200);
    const forwarded = last();
    expect(forwarded.requestLine).toBe('POST /missions HTTP/1.1');
    expect(forwarded.body).toBe(sent.replace('"tags" :', '"metadata" :'));
    expect(forwarded.headers['content-length']).toBe(String(Buffer.byteLength(forwarded.body, 'latin1')));
    expect(forwarded.headers['transfer-encoding']).toBeUndefined();
  });

  it('drops the alias (and one comma) when the canonical member is present, wherever it stands', async () => {
    const cases: Array<[string, string]> = [
      ['{"tags":{"a":1},"metadata":{"b":2}}', '{"metadata":{"b":2}}'],
      ['{"metadata":{"b":2}, "tags":{"a":1}}', '{"metadata":{"b":2}}'],
      [
        '{"name":"n","ignoreTags":true,"tags":[],"ignoreMissingMetadata":false,"metadata":{}}',
        '{"name":"n","ignoreMissingMetadata":false,"metadata":{}}',
      ],
      ['{"ignoreTags":false,"tags":{"a":1}}', '{"ignoreMissingMetadata":false,"metadata":{"a":1}}'],
    ];
    for (const [sent, expected] of cases) {
      await postJson(stack.url, '/missions', sent);
      expect(last().body, sent).toBe(expected);
    }
  });

  it.each([
    [
      'POST',
      `/missions/${UUID}/metadata`,
      '{"tags":{"k":9007199254740993}}',
      '{"metadata":{"k":9007199254740993}}',
    ],
    ['POST', '/projects', '{"name":"p","requiredTags":["x"]}', '{"name":"p","requiredMetadataTypes":["x"]}'],
    ['PUT', `/projects/${UUID}/metadata-types`, '{"tagTypeUUIDs":[]}', '{"metadataTypeUUIDs":[]}'],
  ])('%s %s forwards %s as %s', async (method, path, sent, expected) => {
    await postJson(stack.url, path, sent, method);
    expect(last().body).toBe(expected);
    expect(last().headers['content-length']).toBe(String(expected.length));
  });

  it('rewrites the spellings a servlet container or a format-suffix router routes to a rewritten route (path parameters, %73, //, .json): no bypass of the rename', async () => {
    // Tomcat and Jetty drop `;jsessionid=…`, decode `%73` and merge `//` before routing: without the
    // normalization these reached /missions with "tags" unrenamed (Java upstreams probe, 2026-11-27).
    for (const path of [
      '/missions;jsessionid=ABC',
      '/mi%73sions',
      '//missions',
      `/missions;v=1/${UUID};x/metadata`,
      // A :uuid that is all `;` parameter: Express' uuid `;x` (fix 170).
      '/missions/;x/metadata',
      // A format suffix: Rails' `/missions(.:format)`, Mojolicious' optional format (fix 167).
      '/missions.json',
      `/missions/${UUID}/metadata.json`,
    ]) {
      const reply = await postJson(stack.url, path, '{"name":"n","tags":[1]}');
      expect(reply.status, path).toBe(200);
      expect(last().requestLine, path).toBe(`POST ${path} HTTP/1.1`);
      expect(last().body, path).toBe('{"name":"n","metadata":[1]}');
    }
  });

  it('a chunked JSON body is buffered, rewritten and forwarded with a Content-Length', async () => {
    const pieces = ['{"name":"c","ta', 'gs":{"k":123456789012345678', '90},"ignoreT', 'ags":true}'];
    const reply = await sendChunked(stack.url, 'POST', '/missions', pieces);
    expect(reply.status).toBe(200);
    const forwarded = last();
    expect(forwarded.body).toBe(
      '{"name":"c","metadata":{"k":12345678901234567890},"ignoreMissingMetadata":true}',
    );
    expect(forwarded.headers['content-length']).toBe(String(forwarded.body.length));
    expect(forwarded.headers['transfer-encoding']).toBeUndefined();
  });

  it.each(['gzip', 'deflate', 'br', 'zstd'] as const)(
    'a %s-encoded JSON body is decoded, rewritten and re-encoded with the same coding',
    async (coding) => {
      const sent = '{"name":"z","tags":{"k":12345678901234567890},"ignoreTags":true}';
      const reply = await send(
        stack.url,
        'POST',
        '/missions',
        { ...LEGACY, 'content-type': 'application/json', 'content-encoding': coding },
        ENCODE_SYNC[coding](Buffer.from(sent)),
      );
      expect(reply.status).toBe(200);
      const forwarded = last();
      expect(forwarded.headers['content-encoding']).toBe(coding);
      const bytes = Buffer.from(forwarded.body, 'latin1');
      expect(forwarded.headers['content-length']).toBe(String(bytes.length));
      expect(DECODE_SYNC[coding](bytes).toString()).toBe(
        '{"name":"z","metadata":{"k":12345678901234567890},"ignoreMissingMetadata":true}',
      );
    },
  );

  it('an empty chunked body (`0\\r\\n\\r\\n`) is forwarded as a Content-Length: 0 body is, not refused as JSON', async () => {
    const head = (framing: string) =>
      `POST /missions HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 0.59.0\r\nX-Api-Key: test-key\r\n` +
      `Content-Type: application/json\r\n${framing}\r\nConnection: close\r\n\r\n`;
    const chunked = await sendRawUntilClose(stack.url, `${head('Transfer-Encoding: chunked')}0\r\n\r\n`);
    expect(statusesIn(chunked)).toEqual([200]);
    const viaChunked = last();
    const empty = await sendRawUntilClose(stack.url, head('Content-Length: 0'));
    expect(statusesIn(empty)).toEqual([200]);
    const viaLength = last();
    for (const forwarded of [viaChunked, viaLength]) {
      expect(forwarded.requestLine).toBe('POST /missions HTTP/1.1');
      expect(forwarded.headers['content-length']).toBe('0');
      expect(forwarded.headers['transfer-encoding']).toBeUndefined();
      expect(forwarded.headers['content-type']).toBe('application/json');
      expect(forwarded.body).toBe('');
    }
  });

  it('a gzip body that decodes to nothing is forwarded untouched', async () => {
    const sent = zlib.gzipSync(Buffer.alloc(0));
    const reply = await send(
      stack.url,
      'POST',
      '/missions',
      { ...LEGACY, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      sent,
    );
    expect(reply.status).toBe(200);
    const forwarded = last();
    expect(forwarded.headers['content-encoding']).toBe('gzip');
    expect(forwarded.headers['content-length']).toBe(String(sent.length));
    expect(Buffer.from(forwarded.body, 'latin1').equals(sent)).toBe(true);
  });

  it('answers 415 for a content coding it cannot undo, and 400 for a body that does not decode', async () => {
    // Nothing reaches the upstream, on a new connection or a pooled one.
    const upstreamBytes = () => raw.received.reduce((n, r) => n + r.length, 0);
    const before = upstreamBytes();
    const headers = { ...LEGACY, 'content-type': 'application/json' };
    // `compress` (LZW, RFC 9110 §8.4.1.1): registered, but nothing decodes it any more.
    const lzw = await send(
      stack.url,
      'POST',
      '/missions',
      { ...headers, 'content-encoding': 'compress' },
      'xx',
    );
    expect(lzw.status).toBe(415);
    expect(lzw.json()).toMatchObject({ statusCode: 415, error: 'Unsupported Media Type' });
    expect(lzw.json().message).toMatch(/send it as identity, gzip, deflate, br or zstd\.$/);
    const broken = await send(
      stack.url,
      'POST',
      '/missions',
      { ...headers, 'content-encoding': 'gzip' },
      '{"tags":1}',
    );
    expect(broken.status).toBe(400);
    expect(upstreamBytes()).toBe(before);
  });

  it('query rewrites change the parameter name only; every other byte stays as sent', async () => {
    const cases: Array<[string, string]> = [
      ['/files?take=5&tags=a%20b&skip=0', '/files?take=5&metadataByTypeUuid=a%20b&skip=0'],
      ['/files?tags[]=A&&tags[]=b&x=%41', '/files?metadataByTypeUuid[]=A&&metadataByTypeUuid[]=b&x=%41'],
      ['/files?tags%5Bk%5D=v&tags', '/files?metadataByTypeUuid%5Bk%5D=v&metadataByTypeUuid'],
      ['/files?tags=a&metadataByTypeUuid=b&tags[]=c', '/files?metadataByTypeUuid=b'],
      ['/files?xtags=1&tagsx=2', '/files?xtags=1&tagsx=2'],
      ['/Files/?tags=1', '/Files/?metadataByTypeUuid=1'],
    ];
    for (const [sent, expected] of cases) {
      const reply = await send(stack.url, 'GET', sent, LEGACY);
      expect(reply.status, sent).toBe(200);
      expect(last().requestLine, sent).toBe(`GET ${expected} HTTP/1.1`);
    }
    await send(stack.url, 'POST', `/projects/${UUID}/metadata-types?tagTypeUUID=${WEATHER}`, LEGACY);
    expect(last().requestLine).toBe(
      `POST /projects/${UUID}/metadata-types?metadataTypeUUID=${WEATHER} HTTP/1.1`,
    );
  });

  it('a route without query aliases keeps tags in its query (the backend decides)', async () => {
    await send(stack.url, 'GET', '/missions?tags=1', LEGACY);
    expect(last().requestLine).toBe('GET /missions?tags=1 HTTP/1.1');
    await send(stack.url, 'POST', '/files?tags=1', { ...LEGACY, 'content-length': '0' });
    expect(last().requestLine).toBe('POST /files?tags=1 HTTP/1.1');
  });

  describe('the shim’s own answers', () => {
    let connections = 0;
    beforeEach(() => {
      connections = raw.connections();
    });

    it.each([
      ['truncated', '{"tags":{"a":1}'],
      ['trailing comma', '{"tags":[1,],"name":"x"}'],
      ['single quotes', "{'tags':1}"],
      ['trailing garbage', '{"tags":1} x'],
      ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]).toString('latin1')],
    ])('malformed JSON (%s) → 400 from the shim, nothing forwarded', async (_name, body) => {
      const reply = await send(
        stack.url,
        'POST',
        '/missions',
        { ...LEGACY, 'content-type': 'application/json' },
        Buffer.from(body, 'latin1'),
      );
      expect(reply.status).toBe(400);
      expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
      const error = reply.json<{ statusCode: number; message: string; error: string }>();
      expect(error.statusCode).toBe(400);
      expect(error.error).toBe('Bad Request');
      expect(error.message).toMatch(/^Request body is not valid JSON/);
      expect(raw.connections()).toBe(connections);
    });

    it('a failure of the JSON scanner (a WebAssembly trap) → 500 logged at error, not a 400; nothing forwarded', async () => {
      injectScanFailure(new Error('unreachable'));
      const reply = await postJson(stack.url, '/missions', '{"tags":{"a":1}}');
      expect(reply.status).toBe(500);
      expect(reply.json().message).toBe('The proxy failed unexpectedly; the error was logged.');
      expect(raw.connections()).toBe(connections);
      const logged = stack.logs().find((l) => l.msg === 'unexpected error in the request pipeline');
      expect(logged).toMatchObject({
        level: 50,
        err: { message: expect.stringMatching(/the JSON scanner failed: unreachable/) },
      });
    });

    it('a body over MAX_REWRITE_BODY → 413 (declared length), nothing forwarded', async () => {
      const body = JSON.stringify({ name: 'x'.repeat(1100), tags: {} });
      const reply = await postJson(stack.url, '/missions', body);
      expect(reply.status).toBe(413);
      expect(reply.json().message).toMatch(/MAX_REWRITE_BODY/);
      expect(raw.connections()).toBe(connections);
    });

    it('a chunked body over MAX_REWRITE_BODY → 413, nothing forwarded', async () => {
      const reply = await sendChunked(stack.url, 'POST', '/missions', [
        '{"tags":{},"name":"',
        'y'.repeat(700),
        'y'.repeat(700),
        '"}',
      ]);
      expect(reply.status).toBe(413);
      expect(raw.connections()).toBe(connections);
    });

    it('a body just under the limit is rewritten', async () => {
      const body = JSON.stringify({ name: 'x'.repeat(1000), tags: {} });
      expect(body.length).toBeLessThanOrEqual(1024);
      const reply = await postJson(stack.url, '/missions', body);
      expect(reply.status).toBe(200);
      expect(last().body).toBe(body.replace('"tags"', '"metadata"'));
    });

    it('the limit applies to alias routes only: large bodies elsewhere stream', async () => {
      const body = JSON.stringify({ tags: 'z'.repeat(5000) });
      const reply = await postJson(stack.url, '/debug/echo', body);
      expect(reply.status).toBe(200);
      expect(last().body).toBe(body);
    });
  });
});

describe('a chunked JSON body on a rewritten route, through the reference backend', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('creates the mission with the metadata the client sent as tags', async () => {
    const pieces = [
      `{"name":"chunky","projectUUID":"${OPEN_PROJECT}","ta`,
      `gs":{"${WEATHER}":"dr`,
      'izzle"}}',
    ];
    const reply = await sendChunked(stack.url, 'POST', '/missions', pieces);
    expect(reply.status, reply.text).toBe(201);
    const mission = reply.json<{ uuid: string; metadata: Array<{ value: unknown }>; tags: unknown }>();
    expect(mission.metadata.map((m) => m.value)).toEqual(['drizzle']);
    expect(mission.tags).toEqual(mission.metadata);
  });

  it('keeps a keep-alive connection in step across 400, 413 and rewritten requests', async () => {
    const request = (body: string) =>
      'POST /missions HTTP/1.1\r\nHost: shim\r\nService-Client-Version: 0.59.0\r\nX-Api-Key: k\r\n' +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const valid = JSON.stringify({ name: 'piped', projectUUID: OPEN_PROJECT, tags: { [WEATHER]: 'wind' } });
    const tooLarge = JSON.stringify({ name: 'x'.repeat(1100), tags: {} });
    const limited = await startStack({ MAX_REWRITE_BODY: '1kb' });
    try {
      const out = await sendRawUntilClose(
        limited.url,
        request('{"tags":') +
          request(valid) +
          request(tooLarge) +
          // The last request closes the connection: the exchange ends there, not after a silence.
          request(valid).replace('\r\nHost: shim\r\n', '\r\nHost: shim\r\nConnection: close\r\n'),
      );
      expect(statusesIn(out)).toEqual([400, 201, 413, 201]);
      expect(out.match(/"tags":\[\{/g)).toHaveLength(2);
    } finally {
      await limited.close();
    }
  });

  it('malformed JSON gets the shim’s 400, not the backend’s', async () => {
    const reply = await postJson(stack.url, '/projects', '{"requiredTags":[');
    expect(reply.status).toBe(400);
    expect(reply.json().message).toMatch(/^Request body is not valid JSON: .* at byte \d+/);
  });
});
