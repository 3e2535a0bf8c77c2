/**
 * An `https:` upstream (issue 10 item 2; SPEC §2 `UPSTREAM_CA_FILE`): TLS verified by default, a
 * private CA trusted through `UPSTREAM_CA_FILE`, SNI from the upstream URL's host (not the client's
 * `Host`), keep-alive pooling as for http. The certificates are made by `openssl` in `beforeAll`: a
 * private CA and a server certificate for `localhost` signed by it.
 */
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls, { type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { send } from '../helpers/http.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

let dir: string;
let caFile: string;
let upstream: https.Server;
let upstreamUrl: string;
/** Per TLS connection: the server name the client sent (SNI). */
const serverNames: Array<string | false | null> = [];
let tlsConnections = 0;
/** Per request: the Host header the upstream received. */
const hosts: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'shim-tls-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=compat-shim test CA',
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.pem'),
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=localhost',
    '-keyout',
    file('server.key'),
    '-out',
    file('server.csr'),
  );
  writeFileSync(
    file('ext.cnf'),
    'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  openssl(
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    file('server.pem'),
    '-extfile',
    file('ext.cnf'),
  );
  caFile = file('ca.pem');
  upstream = https.createServer(
    {
      key: readFileSync(file('server.key')),
      cert: readFileSync(file('server.pem')),
      keepAliveTimeout: 30_000,
    },
    (req, res) => {
      hosts.push(req.headers.host ?? '');
      const sni = (req.socket as TLSSocket).servername;
      // As gunicorn's sync workers: a new connection for every request.
      if (req.url?.includes('close=1')) res.setHeader('connection', 'close');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, sni }));
    },
  );
  upstream.on('secureConnection', (socket: TLSSocket) => {
    tlsConnections++;
    serverNames.push(socket.servername);
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  upstreamUrl = `https://localhost:${(upstream.address() as AddressInfo).port}`;
});

afterAll(async () => {
  upstream?.closeAllConnections();
  await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function withStack<T>(env: Record<string, string>, run: (stack: Stack) => Promise<T>): Promise<T> {
  const stack = await startStack({ UPSTREAM_URL: upstreamUrl, ...env });
  try {
    return await run(stack);
  } finally {
    await stack.close();
  }
}

describe('https upstream', () => {
  it('trusted through UPSTREAM_CA_FILE → 200, SNI from the upstream host, client Host kept, pooled', async () => {
    const before = tlsConnections;
    await withStack({ UPSTREAM_CA_FILE: caFile }, async (stack) => {
      for (let i = 0; i < 3; i++) {
        const reply = await send(stack.url, 'GET', `/missions?i=${i}`, { ...CURRENT, host: 'shim.example' });
        expect(reply.status).toBe(200);
        expect(reply.json()).toEqual({ path: `/missions?i=${i}`, sni: 'localhost' });
      }
    });
    expect(hosts.slice(-3)).toEqual(['shim.example', 'shim.example', 'shim.example']);
    expect(serverNames.slice(before)).toEqual(['localhost']);
    // three requests, one TLS handshake: the connection was kept alive and reused
    expect(tlsConnections - before).toBe(1);
  });

  it('builds the trust of UPSTREAM_CA_FILE once, not for every new connection (fix 131)', async () => {
    // From `ca`, Node built a context of its 120-odd roots and the CA file per connection: 12 ms each.
    const contexts = vi.spyOn(tls, 'createSecureContext');
    try {
      await withStack({ UPSTREAM_CA_FILE: caFile }, async (stack) => {
        const atStart = contexts.mock.calls.length;
        const before = tlsConnections;
        for (let i = 0; i < 4; i++) {
          const reply = await send(stack.url, 'GET', `/missions?close=1&i=${i}`, CURRENT);
          expect(reply.status).toBe(200);
        }
        expect(tlsConnections - before).toBe(4);
        expect(contexts.mock.calls.length).toBe(atStart);
      });
    } finally {
      contexts.mockRestore();
    }
  });

  it('untrusted (no CA file: verification is on by default) → 502, counted, nothing served', async () => {
    await withStack({}, async (stack) => {
      const reply = await send(stack.url, 'GET', '/missions', CURRENT);
      expect(reply.status).toBe(502);
      expect(reply.json()).toMatchObject({ statusCode: 502, error: 'Bad Gateway' });
      expect(await stack.metrics.registry.metrics()).toMatch(
        /shim_upstream_errors_total\{kind="refused"\} 1/,
      );
      const line = stack.logs().find((l) => l.msg === 'request completed');
      expect(line?.upstreamError).toMatch(/CERT|SIGNATURE|SELF_SIGNED/);
    });
  });

  it('a certificate for another name → 502 even with the CA trusted', async () => {
    const port = (upstream.address() as AddressInfo).port;
    const stack = await startStack({ UPSTREAM_URL: `https://127.0.0.1:${port}`, UPSTREAM_CA_FILE: caFile });
    try {
      const reply = await send(stack.url, 'GET', '/missions', CURRENT);
      expect(reply.status).toBe(502);
    } finally {
      await stack.close();
    }
  });
});

describe('an upstream that speaks only h2 (ALPN)', () => {
  it('→ 502 JSON and /readyz 503, not the h2 server\'s HTTP/1.0 403 "Missing ALPN Protocol" relayed', async () => {
    const h2 = http2.createSecureServer(
      { key: readFileSync(join(dir, 'server.key')), cert: readFileSync(join(dir, 'server.pem')) },
      (_req, res) => res.end('{}'),
    );
    h2.listen(0, '127.0.0.1');
    await once(h2, 'listening');
    const port = (h2.address() as AddressInfo).port;
    const stack = await startStack({ UPSTREAM_URL: `https://localhost:${port}`, UPSTREAM_CA_FILE: caFile });
    try {
      const reply = await send(stack.url, 'GET', '/missions', CURRENT);
      expect(reply.status).toBe(502);
      expect(reply.json()).toMatchObject({ statusCode: 502, error: 'Bad Gateway' });
      const ready = await send(stack.adminUrl, 'GET', '/readyz');
      expect(ready.status).toBe(503);
    } finally {
      await stack.close();
      await new Promise<void>((resolve) => h2.close(() => resolve()));
    }
  });
});

describe('UPSTREAM_CA_FILE is read once at start', () => {
  it('set for an http: upstream, it is not used, and the start says so', () => {
    expect(
      loadConfig({ UPSTREAM_URL: 'http://backend:3000', UPSTREAM_CA_FILE: caFile }).warnings,
    ).toContainEqual(expect.stringMatching(/UPSTREAM_CA_FILE is set but UPSTREAM_URL is http:/));
    expect(loadConfig({ UPSTREAM_URL: 'https://backend:3000', UPSTREAM_CA_FILE: caFile }).warnings).toEqual(
      [],
    );
  });

  it('an unreadable file is a configuration error', () => {
    expect(() =>
      loadConfig({ UPSTREAM_URL: 'https://x', UPSTREAM_CA_FILE: join(dir, 'missing.pem') }),
    ).toThrow(ConfigError);
  });

  it('a file without a PEM certificate is a configuration error', () => {
    writeFileSync(join(dir, 'empty.pem'), 'not a certificate');
    try {
      loadConfig({ UPSTREAM_URL: 'https://x', UPSTREAM_CA_FILE: join(dir, 'empty.pem') });
      expect.unreachable();
    } catch (err) {
      expect((err as ConfigError).problems).toEqual([expect.stringMatching(/^UPSTREAM_CA_FILE: .*no PEM/)]);
    }
  });

  it('a block that looks like PEM but is no certificate is a configuration error, not a 502 for every request (fix 131)', () => {
    const valid = readFileSync(caFile, 'utf8');
    const corrupt = '-----BEGIN CERTIFICATE-----\nMIIBkzCB/QIJAKZ=\n-----END CERTIFICATE-----\n';
    for (const [name, text, position] of [
      ['garbage.pem', corrupt, '1'],
      ['second-broken.pem', valid + corrupt, '2'],
      ['truncated.pem', valid.slice(0, valid.length - 40), '1'],
    ] as const) {
      writeFileSync(join(dir, name), text);
      try {
        loadConfig({ UPSTREAM_URL: 'https://x', UPSTREAM_CA_FILE: join(dir, name) });
        expect.unreachable();
      } catch (err) {
        expect((err as ConfigError).problems).toEqual([
          expect.stringMatching(
            new RegExp(
              `^UPSTREAM_CA_FILE: .*certificate ${position} \\(counted from 1\\) is not a valid PEM certificate`,
            ),
          ),
        ]);
      }
    }
  });

  it('a readable bundle is kept as text', () => {
    expect(loadConfig({ UPSTREAM_URL: 'https://x', UPSTREAM_CA_FILE: caFile }).upstreamCa).toContain(
      '-----BEGIN CERTIFICATE-----',
    );
  });
});
