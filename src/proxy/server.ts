/**
 * The front-door HTTP server: deliberate timeouts, protocol upgrades refused, pipelined requests
 * handled one at a time in order, and parser errors answered in the shim's JSON error shape.
 */
import http, { type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody } from './errors.ts';

/**
 * Server timeouts, in ms (documented in docs/operations.md):
 * - headers must arrive within 15 s (slowloris),
 * - a whole request within 10 min (slow bodies; long enough for gigabyte uploads on a fast link),
 * - an idle keep-alive connection closes after 65 s: longer than the idle timeout of the load balancers
 *   and ingress proxies that pool connections to the shim (60 s for AWS ALB and nginx), so that they,
 *   not the shim, close an idle connection, and never reuse one the shim is closing (a 502 at the LB).
 */
export const SERVER_TIMEOUTS = Object.freeze({
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 600_000,
  keepAliveTimeoutMs: 65_000,
  /**
   * How often Node checks the two timeouts above. Node's default (30 s) would let a slowloris hold a
   * connection up to 45 s instead of 15 s (test/security/slow-clients.test.ts).
   */
  connectionsCheckingIntervalMs: 1_000,
});

/** Largest request head accepted, in bytes; larger → 431 (RFC 6585 §5). */
export const MAX_HEADER_BYTES = 16 * 1024;

/** Why the server itself refused a request before the pipeline saw it (a metric label). */
export type ParserRejection = 'malformed' | 'header_size' | 'request_timeout' | 'upgrade';

/** The requests of one connection that Node has parsed and the shim has not answered yet. */
interface Pipeline {
  /** In arrival order; the first is being handled, the others wait for it. */
  readonly waiting: Array<{ readonly req: IncomingMessage; readonly res: ServerResponse }>;
  /** The client asked to close after a request already in `waiting`: later ones are never handled. */
  closing: boolean;
  /**
   * The parser failed after the last complete request: its error response, sent once the response in
   * progress is out (RFC 9112 §9.3.2: responses in request order); nothing after it is handled.
   */
  failed?: () => void;
}

/**
 * Whether a request asks to close the connection after its response (RFC 9112 §9.3, §9.6): a `close`
 * connection option, or HTTP/1.0 without `keep-alive`.
 */
function asksToClose(req: IncomingMessage): boolean {
  const http10 = req.httpVersionMajor === 1 && req.httpVersionMinor === 0;
  const connection = req.headers.connection;
  if (connection === undefined) return http10;
  const options = connection.toLowerCase().split(',');
  const has = (option: string) => options.some((o) => o.trim() === option);
  return has('close') || (http10 && !has('keep-alive'));
}

/**
 * Runs `handler` for one request of a connection at a time, in order (RFC 9112 §9.3.2). Node parses
 * pipelined requests as their bytes arrive and would hand each to the pipeline at once, so a rewritten
 * POST (its body read before it is forwarded) was overtaken by the GET behind it, and requests behind a
 * response that closes the connection were still forwarded upstream although their client never gets an
 * answer (RFC 9112 §9.6: a server MUST NOT process further requests once it closes; the shim closes
 * after every rejection of ambiguous framing, so running them executed smuggled requests).
 *
 * A request parsed while an earlier one of its connection is unanswered waits until that response is
 * done (`close`). It is never handled when, by then or on arrival, the connection is closing: the client
 * asked (`Connection: close`, HTTP/1.0 without keep-alive), or the response before it closes the
 * connection (Node ends the socket at that response's finish, before its `close`: the socket is no
 * longer writable), or the parser failed. Such a request gets no response; the connection closes.
 * @returns The listener for the server's `request` (and `checkExpectation`) events, and how the
 *   `clientError` handler defers its response behind the one in progress.
 */
function pipelineInOrder(handler: RequestListener): {
  onRequest: RequestListener;
  /** Sends `respond` now, or after the response in progress when every request so far is complete. */
  onParserError(socket: Duplex, respond: () => void): void;
} {
  const pipelines = new WeakMap<Duplex, Pipeline>();
  const open = (socket: Duplex) => !socket.destroyed && socket.writable;
  const next = (socket: Duplex, pipeline: Pipeline) => {
    pipeline.waiting.shift();
    const head = pipeline.waiting[0];
    if (head !== undefined && pipeline.failed === undefined && open(socket)) {
      handler(head.req, head.res);
      return;
    }
    // Nothing more is handled on this connection (or nothing waits): the parser's error goes out now.
    pipeline.waiting.length = 0;
    const failed = pipeline.failed;
    pipeline.failed = undefined;
    if (failed !== undefined && open(socket)) failed();
  };
  return {
    onRequest(req, res) {
      const socket = req.socket;
      let pipeline = pipelines.get(socket);
      if (pipeline === undefined) {
        pipeline = { waiting: [], closing: false };
        pipelines.set(socket, pipeline);
      }
      if (pipeline.closing || pipeline.failed !== undefined || !open(socket)) return;
      if (asksToClose(req)) pipeline.closing = true;
      const entry = { req, res };
      pipeline.waiting.push(entry);
      const current = pipeline;
      res.once('close', () => {
        if (current.waiting[0] === entry) next(socket, current);
      });
      if (pipeline.waiting.length === 1) handler(req, res);
    },
    onParserError(socket, respond) {
      const pipeline = pipelines.get(socket);
      const last = pipeline?.waiting.at(-1);
      // An error inside the body of the request being handled is that request's own: answered now.
      if (pipeline === undefined || last === undefined || !last.req.complete) {
        respond();
        return;
      }
      pipeline.failed = respond;
    },
  };
}

/**
 * Creates the front-door server (not listening).
 * @param handler The request pipeline (the Express app); it sees one request of a connection at a time
 *   (see {@link pipelineInOrder}), including those with an `Expect` other than `100-continue` (which
 *   Node would answer itself; the pipeline answers 417) and HTTP/1.1 requests without `Host` (the
 *   pipeline answers 400, RFC 9112 §3.2).
 * @param onRejected Told of every request the server refuses itself (parser errors, oversized heads,
 *   timeouts, upgrades), which never reach the pipeline's metrics and log.
 */
export function createFrontServer(
  handler: RequestListener,
  onRejected: (reason: ParserRejection, status: number) => void = () => {},
): http.Server {
  const pipeline = pipelineInOrder(handler);
  const server = http.createServer(
    {
      headersTimeout: SERVER_TIMEOUTS.headersTimeoutMs,
      requestTimeout: SERVER_TIMEOUTS.requestTimeoutMs,
      keepAliveTimeout: SERVER_TIMEOUTS.keepAliveTimeoutMs,
      connectionsCheckingInterval: SERVER_TIMEOUTS.connectionsCheckingIntervalMs,
      maxHeaderSize: MAX_HEADER_BYTES,
      // Checked by the hygiene gate instead, so that the 400 is the shim's (JSON, logged, counted) and
      // takes its turn in the connection's order.
      requireHostHeader: false,
      joinDuplicateHeaders: false,
    },
    pipeline.onRequest,
  );
  // Node answers an unknown expectation with its own bare 417; the hygiene gate answers it instead.
  server.on('checkExpectation', pipeline.onRequest);
  // WebSocket and other upgrades never pass through Express middleware: refuse them here (SPEC §3).
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => {
    onRejected('upgrade', 501);
    writeRaw(socket, 501, 'Protocol upgrades (WebSocket, h2c) are not supported by this proxy.');
  });
  // CONNECT (authority-form) never reaches Express either; without a listener Node drops the
  // connection without a word. Answer as hygiene does (SPEC §3; test/security/admission-bypass-by-path.test.ts).
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    onRejected('malformed', 400);
    writeRaw(
      socket,
      400,
      'The request target must be in origin-form (a path starting with "/"); CONNECT is not supported.',
    );
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A response already started on this socket (the shim's own 400 for the same request, when the
    // parser fails later in its body): a second response would desynchronize a front proxy's
    // response queue. Close instead, as Node's default handler does (lib/_http_server.js
    // socketOnError); test/security/request-smuggling.test.ts.
    const started = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || started?.headersSent) {
      socket.destroy();
      return;
    }
    // Bytes after complete requests that are no request: answered in their turn, after the responses
    // to those requests (RFC 9112 §9.3.2; test/security/request-smuggling.test.ts › pipelined).
    if (err.code === 'HPE_HEADER_OVERFLOW') {
      onRejected('header_size', 431);
      pipeline.onParserError(socket, () =>
        writeRaw(socket, 431, `Request headers are larger than ${MAX_HEADER_BYTES} bytes.`),
      );
    } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      onRejected('request_timeout', 408);
      pipeline.onParserError(socket, () => writeRaw(socket, 408, 'The request was not received in time.'));
    } else {
      onRejected('malformed', 400);
      pipeline.onParserError(socket, () => writeRaw(socket, 400, 'The request is not valid HTTP/1.1.'));
    }
  });
  return server;
}

function writeRaw(socket: Duplex, status: number, message: string): void {
  const body = errorBody(status, message);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.toString('utf8')}`,
  );
}
