/**
 * Attack: header-name aliasing through a CGI-style upstream (`X_Forwarded_For`, `SCRIPT_NAME`).
 *
 * WSGI servers (gunicorn, uWSGI), PHP-FPM and Rack hand a request's headers to the application as
 * CGI variables: `HTTP_` + the name upper-cased with every `-` turned into `_`. A header spelled with
 * underscores is a valid token (RFC 9110 §5.1) and a different field for the shim, yet the same
 * variable for the application: gunicorn 20.1 (Debian 12's) joins `X_Forwarded_For: 6.6.6.6` and the
 * shim's `X-Forwarded-For: 127.0.0.1` into `HTTP_X_FORWARDED_FOR = "6.6.6.6,127.0.0.1"`, so the
 * client's forgery reaches the application first although `FORWARDED_HEADERS=replace` drops the
 * client's forwarding headers, and `X_Forwarded_Host: evil.test/reset?to=x` arrives without the check
 * `X-Forwarded-Host` gets (fix 25). gunicorn 20.1 also takes a header named `SCRIPT_NAME` as the CGI
 * variable and strips it from the path: `GET /api/health` (public, judged by the gates) with
 * `SCRIPT_NAME: /api` reaches the application as `PATH_INFO=/health`.
 *
 * Defence (src/proxy/outgoing-request.ts `isUnderscoreSpelling`): a client header whose name, with `_` for
 * `-`, is a header the shim sets, strips or admits a request on, or a CGI meta-variable (RFC 3875
 * §4.1), is not forwarded; every other header goes on unchanged (SPEC §4), the configured admission
 * headers as configured; the request goes on, its log line names what was dropped.
 *
 * The upstream is a raw TCP server; `cgiEnviron` reads its bytes as gunicorn 20.1 builds a WSGI
 * environ (gunicorn/http/wsgi.py `create`), so the test needs no Python.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../helpers/http.ts';
import { answerEachRequest, type FramedRequest, markRequests } from '../helpers/http1-frames.ts';
import { type RawUpstream, startRawUpstream } from '../helpers/raw-upstream.ts';
import { CURRENT, type Stack, startStack } from '../helpers/stack.ts';

const stacks: Stack[] = [];
const upstreams: RawUpstream[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
  for (const u of upstreams.splice(0)) await u.close();
});

/**
 * The WSGI environ gunicorn 20.1 builds from a request: `HTTP_<NAME>` with `-` → `_`, repeats joined
 * with `,` in arrival order; a `SCRIPT_NAME` header becomes `SCRIPT_NAME`, and `PATH_INFO` is the path
 * after its first occurrence.
 */
function cgiEnviron(request: FramedRequest): Record<string, string> {
  const environ: Record<string, string> = {};
  let scriptName = '';
  for (const [name, value] of request.headers) {
    const upper = name.toUpperCase();
    if (upper === 'CONTENT-LENGTH' || upper === 'CONTENT-TYPE') continue;
    if (upper === 'SCRIPT_NAME') scriptName = value;
    const key = `HTTP_${upper.replaceAll('-', '_')}`;
    environ[key] = key in environ ? `${environ[key]},${value}` : value;
  }
  const path = request.target.split('?')[0] ?? '';
  environ.SCRIPT_NAME = scriptName;
  environ.PATH_INFO = scriptName === '' ? path : (path.split(scriptName)[1] ?? '');
  return environ;
}

async function stackOnCgiUpstream(env: Record<string, string> = {}) {
  const upstream = await startRawUpstream(answerEachRequest());
  upstreams.push(upstream);
  const stack = await startStack({ UPSTREAM_URL: upstream.url, ...env });
  stacks.push(stack);
  return { upstream, stack };
}

/** Sends one request through the shim; returns its status and the environ the application would get. */
async function environOf(
  upstream: RawUpstream,
  stack: Stack,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; environ: Record<string, string> | undefined }> {
  const since = markRequests(upstream.received);
  const reply = await send(stack.url, 'GET', path, headers);
  const [request, ...more] = since();
  expect(more).toEqual([]);
  return { status: reply.status, environ: request && cgiEnviron(request) };
}

const FORGED = {
  X_Forwarded_For: '6.6.6.6',
  X_Forwarded_Host: 'evil.test/reset?to=x',
  X_Forwarded_Proto: 'https',
};

describe('client headers whose names alias a forwarding header for a CGI-style upstream', () => {
  it('FORWARDED_HEADERS=replace: the application reads this hop’s values alone', async () => {
    const { upstream, stack } = await stackOnCgiUpstream({ FORWARDED_HEADERS: 'replace' });
    const { status, environ } = await environOf(upstream, stack, '/api/health', {
      ...FORGED,
      host: 'shim.test',
    });
    expect(status).toBe(200);
    expect(environ?.HTTP_X_FORWARDED_FOR).toBe('127.0.0.1');
    expect(environ?.HTTP_X_FORWARDED_HOST).toBe('shim.test');
    expect(environ?.HTTP_X_FORWARDED_PROTO).toBe('http');
    const line = stack.logs().find((l) => l.msg === 'request completed');
    expect(line?.underscoredHeaders).toEqual(['x_forwarded_for', 'x_forwarded_host', 'x_forwarded_proto']);
  });

  it('append: an X_Forwarded_Host no proxy would write does not get past the X-Forwarded-Host check', async () => {
    const { upstream, stack } = await stackOnCgiUpstream();
    const { status, environ } = await environOf(upstream, stack, '/user/me', {
      ...CURRENT,
      ...FORGED,
      host: 'shim.test',
    });
    expect(status).toBe(200);
    expect(environ?.HTTP_X_FORWARDED_HOST).toBe('shim.test');
    expect(environ?.HTTP_X_FORWARDED_FOR).toBe('127.0.0.1');
  });
});

describe('a SCRIPT_NAME header (gunicorn 20.1 strips it from the path)', () => {
  it('the application routes the path the gates judged', async () => {
    const { upstream, stack } = await stackOnCgiUpstream();
    const { status, environ } = await environOf(upstream, stack, '/api/health', { SCRIPT_NAME: '/api' });
    expect(status).toBe(200);
    expect(environ?.PATH_INFO).toBe('/api/health');
    expect(environ?.HTTP_SCRIPT_NAME).toBeUndefined();
  });
});

describe('headers with `_` the shim is configured to admit a request on', () => {
  it('API_KEY_HEADER and CLIENT_VERSION_HEADER with `_` still reach the upstream, as other headers with `_` do', async () => {
    const { upstream, stack } = await stackOnCgiUpstream({
      API_KEY_HEADER: 'X_Api_Key',
      CLIENT_VERSION_HEADER: 'Client_Version',
    });
    const { status, environ } = await environOf(upstream, stack, '/user/me', {
      x_api_key: 'k1',
      client_version: '1.0.0',
      x_request_id: 'r1',
    });
    expect(status).toBe(200);
    expect(environ?.HTTP_X_API_KEY).toBe('k1');
    expect(environ?.HTTP_CLIENT_VERSION).toBe('1.0.0');
    expect(environ?.HTTP_X_REQUEST_ID).toBe('r1');
  });
});
