/**
 * The upstream pool (SPEC §4; issue 10 item 2): the agent by the upstream's protocol, verification
 * on, SNI from the URL host (never the client's Host), extra CAs added to Node's roots.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { rootCertificates } from 'node:tls';
import { describe, expect, it } from 'vitest';
import {
  createUpstreamTransport,
  isEstablished,
  isQueuedRequest,
  onNewConnection,
  retireConnection,
  SharedReadBufferAgent,
  tlsServerName,
  writeProgress,
} from '../../../src/proxy/upstream-agent.ts';
import { freedConnection } from '../../helpers/freed-connection.ts';

describe('tlsServerName', () => {
  it.each([
    ['api.internal', 'api.internal'],
    ['localhost', 'localhost'],
    // A fully qualified spelling: sent with its dot, Go's TLS servers (Caddy) refused every handshake.
    ['api.ns.svc.cluster.local.', 'api.ns.svc.cluster.local'],
    ['127.0.0.1', ''],
    ['[::1]', ''],
  ])('%s → %j', (host, expected) => expect(tlsServerName(host)).toBe(expected));
});

describe('createUpstreamTransport', () => {
  it('http: a keep-alive http.Agent whose sockets share one read buffer, port 80 by default', () => {
    const t = createUpstreamTransport(new URL('http://backend'));
    expect(t.agent).toBeInstanceOf(SharedReadBufferAgent);
    expect(t.agent).toBeInstanceOf(http.Agent);
    expect(t.agent).not.toBeInstanceOf(https.Agent);
    expect(t.request).toBe(http.request);
    expect(t.target).toEqual({ protocol: 'http:', hostname: 'backend', port: 80 });
    expect((t.agent as http.Agent & { keepAlive: boolean }).keepAlive).toBe(true);
    t.agent.destroy();
  });

  it('https: a keep-alive https.Agent that verifies, SNI from the URL host', () => {
    const t = createUpstreamTransport(new URL('https://api.internal:8443/base'));
    expect(t.agent).toBeInstanceOf(https.Agent);
    expect(t.target).toEqual({
      protocol: 'https:',
      hostname: 'api.internal',
      port: 8443,
      servername: 'api.internal',
    });
    const options = (t.agent as https.Agent & { options: https.AgentOptions }).options;
    expect(options.rejectUnauthorized).toBe(true);
    expect(options.keepAlive).toBe(true);
    expect(options.ca).toBeUndefined();
    t.agent.destroy();
  });

  it('https with a CA bundle: one trust store, Node’s roots and the bundle, built once for every connection', () => {
    const pem = rootCertificates[0]!; // any valid certificate
    const t = createUpstreamTransport(new URL('https://127.0.0.1'), { caPem: pem });
    const options = (t.agent as https.Agent & { options: https.AgentOptions }).options;
    // Not `ca`, from which Node builds a context per connection (docs/reliability.md fix 131).
    expect(options.ca).toBeUndefined();
    expect(options.secureContext).toBeDefined();
    expect(t.target).toMatchObject({ port: 443, servername: '' });
    t.agent.destroy();
  });

  it('refuses another protocol', () => {
    expect(() => createUpstreamTransport(new URL('ftp://x'))).toThrow(/unsupported/);
  });
});

describe('isEstablished', () => {
  // Plain objects with a socket's flags: no socket is opened.
  const socket = (flags: object) => flags as unknown as Duplex;
  it('is false while there is no socket, or it connects, or its TLS handshake runs', () => {
    expect(isEstablished(null)).toBe(false);
    expect(isEstablished(socket({ connecting: true }))).toBe(false);
    expect(isEstablished(socket({ connecting: false, _secureEstablished: false }))).toBe(false);
  });
  it('is true for a connected plain socket, or a TLS one after its handshake', () => {
    expect(isEstablished(socket({ connecting: false }))).toBe(true);
    expect(isEstablished(socket({ connecting: false, _secureEstablished: true }))).toBe(true);
  });
});

describe('writeProgress (fix 85)', () => {
  const socket = (dispatched: number | undefined, queue: number | undefined) =>
    ({
      _bytesDispatched: dispatched,
      _handle: queue === undefined ? null : { writeQueueSize: queue },
    }) as unknown as Duplex;

  it('counts the bytes the kernel took: handed to libuv, less what libuv still holds', () => {
    expect(writeProgress(socket(4_194_304, 36_757))).toEqual({ sent: 4_157_547, queued: true });
    expect(writeProgress(socket(1_000, 0))).toEqual({ sent: 1_000, queued: false });
  });

  it('moves when the kernel takes part of a queued write, though no write completed', () => {
    const before = writeProgress(socket(200_000, 70_000));
    const after = writeProgress(socket(200_000, 65_000));
    expect(after.sent).toBeGreaterThan(before.sent);
    expect(after.queued).toBe(true);
  });

  it("sees nothing queued on a socket without a handle or Node's fields", () => {
    expect(writeProgress(socket(undefined, undefined))).toEqual({ sent: 0, queued: false });
  });
});

describe('onNewConnection', () => {
  /** An agent whose pool holds stand-ins for idle connections (no socket is opened). */
  function agentWithIdle(idle: Record<string, string[]>): {
    agent: http.Agent;
    free: Record<string, unknown>;
  } {
    const agent = new http.Agent({ keepAlive: true });
    const free = agent.freeSockets as unknown as Record<string, unknown>;
    for (const [name, sockets] of Object.entries(idle)) free[name] = sockets;
    return { agent, free };
  }

  it('hides every idle connection while the request is made, and puts them back', () => {
    const { agent, free } = agentWithIdle({ 'a:80:': ['s1', 's2'], 'b:80:': ['s3'] });
    const seen = onNewConnection(agent, () => ({ ...free }));
    expect(seen).toEqual({});
    expect(free).toEqual({ 'a:80:': ['s1', 's2'], 'b:80:': ['s3'] });
  });

  it('keeps a connection freed meanwhile, after the hidden ones', () => {
    const { agent, free } = agentWithIdle({ 'a:80:': ['s1'] });
    onNewConnection(agent, () => {
      free['a:80:'] = ['s9'];
    });
    expect(free).toEqual({ 'a:80:': ['s1', 's9'] });
  });

  it('puts them back when making the request throws', () => {
    const { agent, free } = agentWithIdle({ 'a:80:': ['s1'] });
    expect(() =>
      onNewConnection(agent, () => {
        throw new Error('invalid header');
      }),
    ).toThrow('invalid header');
    expect(free).toEqual({ 'a:80:': ['s1'] });
  });
});

describe('isQueuedRequest', () => {
  /** A pool whose queues are as given (Node's `Agent.requests`: name → queued requests). */
  const poolWith = (requests: Record<string, unknown[]>) => ({ requests }) as unknown as http.Agent;
  const a = {} as http.ClientRequest;
  const b = {} as http.ClientRequest;

  it('is true for the request last queued (the agent queues at the end)', () => {
    expect(isQueuedRequest(poolWith({ 'up:80:': [a, b] }), b)).toBe(true);
  });

  it('is false for a request given a connection, or queued earlier', () => {
    expect(isQueuedRequest(poolWith({}), a)).toBe(false);
    expect(isQueuedRequest(poolWith({ 'up:80:': [a, b] }), a)).toBe(false);
  });

  it('a real pool at its limit queues the next request', () => {
    const agent = new http.Agent({ maxSockets: 1 });
    const options = { host: '127.0.0.1', port: 9, agent };
    const first = http.request(options);
    const second = http.request(options);
    first.on('error', () => undefined);
    second.on('error', () => undefined);
    expect(isQueuedRequest(agent, first)).toBe(false);
    expect(isQueuedRequest(agent, second)).toBe(true);
    first.destroy();
    second.destroy();
    agent.destroy();
  });
});

describe('retired connections (fix 169)', () => {
  // Node's agent hands a freed connection to a request waiting in its queue without asking
  // keepSocketAlive: the pool's own `free` listener, first, closes a retired one in either case.
  it('a connection freed after a keep-alive exchange is pooled; a retired one is closed instead', () => {
    const options = { host: 'backend', port: 80 };
    for (const retire of [false, true]) {
      const agent = new SharedReadBufferAgent({ keepAlive: true });
      const name = agent.getName(options);
      const socket = freedConnection();
      if (retire) retireConnection(socket);
      agent.emit('free', socket, options);
      expect(socket.destroyed, `retired: ${retire}`).toBe(retire);
      expect(agent.freeSockets[name]?.length ?? 0, `retired: ${retire}`).toBe(retire ? 0 : 1);
      agent.destroy();
    }
  });

  it('a retired connection is not handed to a request waiting in the queue', () => {
    const agent = new SharedReadBufferAgent({ keepAlive: true });
    const options = { host: 'backend', port: 80 };
    const name = agent.getName(options);
    const waiting = { destroyed: false } as unknown as http.ClientRequest;
    (agent.requests as unknown as Record<string, unknown[]>)[name] = [waiting];
    const socket = freedConnection();
    retireConnection(socket);
    agent.emit('free', socket, options);
    expect(socket.destroyed).toBe(true);
    // Still waiting, for a connection of its own (the agent makes one when the closed one is removed).
    expect((agent.requests as unknown as Record<string, unknown[]>)[name]).toEqual([waiting]);
    agent.destroy();
  });
});
