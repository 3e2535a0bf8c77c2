/**
 * Marker credentials and what to look for in the logs, for the credential-harvesting tests
 * (`test/security/secrets-in-logs.test.ts`, `test/security/aliases-secrets-in-logs.test.ts`): every
 * request carries the markers; afterwards no log line may contain any of them, in any form.
 */
import net from 'node:net';
import { type RawUpstream, startRawUpstream } from './raw-upstream.ts';
import type { Stack } from './stack.ts';

/** One unique marker per kind of credential. */
export const SECRETS = {
  authtoken: 'authtoken-5ec4e7-aaaa',
  refreshtoken: 'refreshtoken-5ec4e7-bbbb',
  apiKey: 'apikey-5ec4e7-cccc',
  customKey: 'servicetoken-5ec4e7-dddd',
  authorization: 'bearer-5ec4e7-eeee',
  proxyAuthorization: 'proxyauth-5ec4e7-ffff',
  setCookie: 'session-5ec4e7-0000',
  query: 'querytoken-5ec4e7-1111',
  /** In an absolute-form target's userinfo, a fragment, a path parameter (docs/reliability.md fix 128). */
  userinfo: 'userinfo-5ec4e7-2222',
  fragment: 'fragment-5ec4e7-3333',
  pathParameter: 'jsession-5ec4e7-4444',
};

const COOKIE = `authtoken=${SECRETS.authtoken}; refreshtoken=${SECRETS.refreshtoken}`;
/** Every credential header a client may send, carrying the markers (for `send`). */
export const SECRET_HEADERS = {
  cookie: COOKIE,
  'x-api-key': SECRETS.apiKey,
  'x-service-token': SECRETS.customKey,
  authorization: `Bearer ${SECRETS.authorization}`,
  'proxy-authorization': `Basic ${SECRETS.proxyAuthorization}`,
};
/** {@link SECRET_HEADERS} as raw header lines, each ending in CRLF (for `sendRawUntilClose` and sockets). */
export const RAW_SECRET_HEADERS =
  `Cookie: ${COOKIE}\r\nX-Api-Key: ${SECRETS.apiKey}\r\nX-Service-Token: ${SECRETS.customKey}\r\n` +
  `Authorization: Bearer ${SECRETS.authorization}\r\nProxy-Authorization: Basic ${SECRETS.proxyAuthorization}\r\n`;
/** A legacy client's version header alone: the credentials come from {@link SECRET_HEADERS}. */
export const LEGACY = { 'service-client-version': '0.59.0' };

/**
 * The shim's environment for these tests: every log line (`trace`), the API key read from a configured
 * header (`x-service-token`), and a 1 KiB `MAX_REWRITE_BODY`.
 */
export const TRACE_ENV = { LOG_LEVEL: 'trace', API_KEY_HEADER: 'x-service-token', MAX_REWRITE_BODY: '1kb' };

/**
 * A raw upstream that misbehaves according to the request path, every answer with a `Set-Cookie`
 * carrying its marker: `/reset…` resets, `/invalid…` sends an invalid status line, `/stall…` never
 * answers, `/midbody…` resets in the middle of a JSON body, `/missions…` answers 200 with invalid JSON
 * (on a route the alias layer patches), anything else 200 with a small valid JSON body.
 */
export function faultyUpstream(): Promise<RawUpstream> {
  return startRawUpstream((socket, received) => {
    if (!received.includes('\r\n\r\n')) return;
    const path = /^[A-Z]+ (\S+)/.exec(received)?.[1] ?? '';
    const setCookie = `Set-Cookie: session=${SECRETS.setCookie}; HttpOnly\r\n`;
    if (path.startsWith('/reset')) socket.resetAndDestroy();
    else if (path.startsWith('/invalid')) socket.end(`HTTP/1.1 TWO HUNDRED\r\n${setCookie}\r\n`);
    else if (path.startsWith('/stall')) return;
    else if (path.startsWith('/midbody')) {
      socket.write(
        `HTTP/1.1 200 OK\r\n${setCookie}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"metadata":`,
      );
      setTimeout(() => socket.resetAndDestroy(), 20);
    } else if (path.startsWith('/missions')) {
      const body = '{"data":[{"metadata":[1,2]},'; // invalid JSON on a patched route
      socket.end(
        `HTTP/1.1 200 OK\r\n${setCookie}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
    } else {
      const body = '{"metadata":{"a":1}}';
      socket.end(
        `HTTP/1.1 200 OK\r\n${setCookie}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
    }
  });
}

/**
 * A legacy client, with the marker credentials, that announces an `announced`-byte `POST path` of
 * `type`, sends 500 bytes of it (a JSON start naming `tags`) and hangs up 50 ms later; resolves once
 * closed.
 * @param url The shim's origin.
 * @param announced Content-Length, > 500 (default 100,000; below the stack's MAX_REWRITE_BODY for an
 * abort on a rewritten route, which would otherwise answer 413 at the head).
 */
export function abortMidUpload(url: string, path: string, type: string, announced = 100_000): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1', () => {
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: shim.test\r\nService-Client-Version: 0.59.0\r\n${RAW_SECRET_HEADERS}` +
          `Content-Type: ${type}\r\nContent-Length: ${announced}\r\n\r\n${'{"tags":['.padEnd(500, '1,')}`,
      );
      setTimeout(() => socket.destroy(), 50);
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve());
  });
}

/** The response status of every request line the stacks logged so far (`res.statusCode`). */
export function loggedStatuses(...stacks: Stack[]): Set<number | undefined> {
  return new Set(
    stacks.flatMap((s) => s.logs()).map((l) => (l.res as { statusCode?: number } | undefined)?.statusCode),
  );
}

/** Every form a marker could take in a JSON log line: plain, percent-encoded, base64 (a prefix), hex. */
function forms(secret: string): string[] {
  return [
    secret,
    encodeURIComponent(secret),
    Buffer.from(secret).toString('base64').slice(0, 16),
    Buffer.from(secret).toString('hex'),
  ];
}

/**
 * Every marker of {@link SECRETS} found in `text`, in any of its forms, as `name (form)`; empty when
 * nothing leaked.
 */
export function leakedSecrets(text: string): string[] {
  return Object.entries(SECRETS).flatMap(([name, secret]) =>
    forms(secret)
      .filter((form) => text.includes(form))
      .map((form) => `${name} (${form})`),
  );
}

/** Log fields that would carry credentials whatever their values: raw heads, cookie and authorization headers. */
export const LEAKY_FIELDS = /rawPacket|rawHeaders|"cookie"|"authorization"|"set-cookie"/i;
