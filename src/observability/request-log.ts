/**
 * One log line per request (SPEC §8): method, path, status, duration, client version, the fields
 * plugins added (e.g. what a plugin rewrote), and the request's `X-Request-Id` and trace id when it
 * carries valid ones (correlation.ts). No other header, no cookie and no query is ever serialized, so no
 * credential can reach the log; the logger's redaction is a second line of defence, and it runs for
 * every line a redaction path can reach into (logger.ts `loggerForLine`: a plugin's log field named
 * `headers` or `cookies`); the request log's own `req` and `res` objects hold no such key.
 *
 * Written for the process logger when the response finishes (or its connection closes first), by
 * logger.ts `lineWriter`: the text `logger.info` would write, made with one `JSON.stringify`, and no
 * per-request child logger. pino-http did the same job for about 50 µs of CPU and 120 MB of extra heap
 * under load per request on the benchmark machine (a child logger per request, wrapped serializers, an
 * `Error` with a stack trace for every 5xx): bench/RESULTS.md.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { CLIENT_CAUSED_5XX } from '../core/errors.ts';
import { stateOf } from '../core/exchange.ts';
import { requestIdOf, traceIdOf } from './correlation.ts';
import { type LineLevel, lineWriter } from './logger.ts';

/**
 * Creates the request log: a function to call once per request on its arrival. It numbers the request
 * and writes its line when the response finishes or its connection closes first, whichever comes first,
 * once. The shim's pipeline calls it from its first middleware (app.ts), with the exchange's metrics
 * as `onFinish`, so that one pair of listeners serves both.
 *
 * Line: `{reqId, req: {method, path}, res: {statusCode}, responseTime (ms), remoteAddress, requestId?,
 * traceId?, clientVersion, route, rejection?, userAgent? (with a rejection, at most 256 characters),
 * refusal? (the message of the shim's refusal), …exchange.logFields, aborted?}`, `msg: "request completed"`, level `info` (`error` for a
 * 5xx status, but for the shim's 501 to a protocol upgrade and 505 to another HTTP version,
 * `CLIENT_CAUSED_5XX`: the client's doing, which any client can repeat, so it must not fill the error
 * log). `aborted: true` marks a connection that closed before its response ended; such a line is at
 * `error` when an upstream failure cut it (`upstreamError`: a stream the upstream reset or left silent
 * past `UPSTREAM_TIMEOUT_MS`), as the 502 or 504 it would have been before the response started.
 * @param logger The process logger.
 * @returns `(req, res, arrived, onFinish?, onAbort?)`: `arrived` is `performance.now()` at arrival, in
 *   ms; `onFinish` runs when the response finished, just before its line is written (not for an abort);
 *   `onAbort` when the connection closed first, just before that line is written.
 * @throws Nothing (nor does the returned function, which only adds listeners); what `onFinish` or
 *   `onAbort` throws is thrown from the response's event, and that line is not written.
 */
export function createRequestLog(
  logger: Logger,
): (
  req: IncomingMessage,
  res: ServerResponse,
  arrived: number,
  onFinish?: () => void,
  onAbort?: () => void,
) => void {
  const write = lineWriter(logger);
  let counter = 0;
  return (req, res, arrived, onFinish, onAbort) => {
    const reqId = ++counter;
    // Read now: once the socket is gone, a peer address never read is lost (Node caches it per socket).
    const remoteAddress = req.socket.remoteAddress;
    const finished = () => {
      res.off('close', closed);
      onFinish?.();
      writeLine(write, reqId, arrived, remoteAddress, req, res);
    };
    const closed = () => {
      res.off('finish', finished);
      onAbort?.();
      writeLine(write, reqId, arrived, remoteAddress, req, res);
    };
    res.on('finish', finished);
    res.on('close', closed);
  };
}

function writeLine(
  write: (level: LineLevel, line: Record<string, unknown>, msg: string) => void,
  reqId: number,
  arrived: number,
  remoteAddress: string | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const status = res.statusCode;
  const state = stateOf(res);
  const line: Record<string, unknown> = {
    reqId,
    req: { method: req.method, path: logPath(targetOf(req, state?.exchange.path)) },
    res: { statusCode: status },
    responseTime: Math.round(performance.now() - arrived),
    remoteAddress,
  };
  // Correlation with the ingress's, the upstream's and a tracer's records (correlation.ts): checked
  // values of two headers that carry no credential, the only header values the line holds.
  const requestId = requestIdOf(req.headers['x-request-id']);
  if (requestId !== undefined) line.requestId = requestId;
  const traceId = traceIdOf(req.headers.traceparent);
  if (traceId !== undefined) line.traceId = traceId;
  if (state) {
    line.clientVersion = state.exchange.clientVersion?.version;
    line.route = state.route;
    if (state.rejection) {
      line.rejection = state.rejection;
      // Which client it was: a release that sends no version, a misconfigured key header.
      const agent = req.headers['user-agent'];
      if (agent !== undefined) line.userAgent = logSafe(agent.slice(0, MAX_USER_AGENT));
    }
    Object.assign(line, state.exchange.logFields);
  }
  if (!res.writableFinished) line.aborted = true;
  const clientCaused = state?.rejection !== undefined && CLIENT_CAUSED_5XX.has(state.rejection);
  // An abort an upstream failure caused is that failure's line, as its 502 or 504 would have been.
  const upstreamCut = line.aborted === true && line.upstreamError !== undefined;
  write((status >= 500 && !clientCaused) || upstreamCut ? 'error' : 'info', line, 'request completed');
}

/** A `;name=value` path parameter's value (RFC 3986 §3.3), up to the next parameter or segment. */
const PARAMETER_VALUE = /(;[^/;=]*=)[^/;]*/g;

/**
 * A request's path as the log holds it: as sent, without what can carry a credential as the query
 * string can. The query and a fragment are dropped, the values of path parameters
 * (`/missions;jsessionid=…` → `/missions;jsessionid=`), and in a target that is not origin-form
 * (`http://alice:pw@host/x`, refused 400, and the refusal logged) everything from `://` to the last
 * `@` (→ `http://host/x`): a broken client's password may hold `/`, `?` or `#`, which RFC 3986 would
 * have encoded. Parameter names and everything else stay, so that a refused evasion (`/a;/../b`) is
 * still seen as sent. Pure; an origin-form path with none of these is returned as it is (three scans).
 * @param target The request target (`req.url`), or a path without its query (`Exchange.path`).
 * @returns The path to log.
 * @throws Nothing.
 * @example logPath('/missions;jsessionid=8F3A/metadata') // → '/missions;jsessionid=/metadata'
 * @example logPath('http://alice:p/w?d@shim.test/missions?x=1') // → 'http://shim.test/missions'
 */
export function logPath(target: string): string {
  let out = target;
  if (out.charCodeAt(0) !== 0x2f /* / */) {
    const scheme = out.indexOf('://');
    const at = out.lastIndexOf('@');
    if (scheme !== -1 && at > scheme) out = out.slice(0, scheme + 3) + out.slice(at + 1);
  }
  const query = out.search(/[?#]/);
  if (query !== -1) out = out.slice(0, query);
  return out.includes(';') ? out.replace(PARAMETER_VALUE, '$1') : out;
}

/** Most characters of a `User-Agent` a refusal's line holds. */
const MAX_USER_AGENT = 256;

/**
 * What {@link logSafe} escapes: everything but visible ASCII and space, and `\` too (nginx's
 * `escape=default` does), else a client's literal `\x9b` would read as an escaped byte.
 */
const UNSAFE_IN_LOG = /[^\x20-\x5b\x5d-\x7e]/g;

/**
 * A client's header value as the log holds it: Node reads field values as Latin-1, so bytes 0x80–0x9f
 * arrive as the C1 controls U+0080–U+009F (CSI, NEL, OSC …), which JSON does not escape and a terminal
 * tailing the log may act on. Everything outside visible ASCII and space, and `\` itself, is written
 * `\xNN`, as nginx's access log does (`escape=default`) and as consumer.ts's `sanitizeId` keeps only
 * visible ASCII: a client's literal `\x9b` is logged `\x5cx9b`, never like an escaped byte.
 * @param value A header value as Node parsed it (Latin-1: code units up to 0xff).
 * @returns The value with those characters escaped; `value` itself when there are none.
 * @throws Nothing.
 * @example logSafe('probe\u009b2J') // → 'probe\\x9b2J' (the characters `probe\x9b2J`)
 */
function logSafe(value: string): string {
  // One pass: `replace` returns the same string when nothing matches.
  return value.replace(UNSAFE_IN_LOG, (c) => {
    const code = c.charCodeAt(0);
    // Above 0xff (not from Node's Latin-1 parser, but never ambiguous): \uNNNN.
    return code > 0xff
      ? `\\u${code.toString(16).padStart(4, '0')}`
      : `\\x${code.toString(16).padStart(2, '0')}`;
  });
}

/**
 * What the line's path is made from: the exchange's path for an origin-form target (what the pipeline
 * judged), else the raw target whole, so that {@link logPath} sees all of an absolute-form one.
 */
function targetOf(req: IncomingMessage, path: string | undefined): string {
  const url = req.url ?? '';
  return url.charCodeAt(0) === 0x2f /* / */ ? (path ?? url) : url;
}
