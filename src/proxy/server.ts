/**
 * The front-door HTTP server: deliberate timeouts, protocol upgrades refused, pipelined requests
 * handled one at a time in order, and parser errors answered in the shim's JSON error shape.
 */
import http, { type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import {
  errorHead,
  REJECTION_STATUS,
  type ServerRejection,
  UPGRADE_REFUSED_MESSAGE,
} from '../core/errors.ts';
import { markAnsweredByServer } from '../core/exchange.ts';
import { isHttp10OrOlder } from '../core/raw-headers.ts';
import { noteAnswered } from './client-reset.ts';
import { afterPendingIo } from './own-pause.ts';

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

/** The messages of the server's own refusals (SPEC §7: what is wrong); their statuses are errors.ts's. */
const REFUSAL_MESSAGES: Readonly<Record<ServerRejection, string>> = Object.freeze({
  malformed: 'The request is not valid HTTP/1.1.',
  // Node's parser also refuses a head of about 1,000 fields, however short (Node 24: 900 fields of 6
  // or 13 bytes pass, 1,000 do not), well under the byte limit (test/security/header-abuse.test.ts).
  header_size: `Request headers are too large: more than ${MAX_HEADER_BYTES} bytes, or too many fields; send fewer or shorter headers.`,
  request_timeout: 'The request was not received in time.',
  upgrade: UPGRADE_REFUSED_MESSAGE,
});

/** The server's refusal of a `CONNECT` (counted `malformed`): the hygiene gate's origin-form rule. */
const CONNECT_REFUSED_MESSAGE =
  'The request target must be in origin-form (a path starting with "/"); CONNECT is not supported.';

/** The requests of one connection that Node has parsed and the shim has not answered yet. */
interface Pipeline {
  /** Their responses (`res.req` is the request), in order; the first one's request is being handled. */
  readonly unanswered: ServerResponse[];
  /** The client asked to close after a request already parsed: later ones are never handled. */
  closing: boolean;
  /** Requests parsed that will never be handled (see {@link pipelineInOrder}); one too many cuts. */
  ignored: number;
  /**
   * The parser failed: its error response goes out once `remaining` more responses are done (RFC 9112
   * §9.3.2: responses in request order); nothing after it is handled.
   */
  failed?: { readonly respond: () => void; remaining: number };
  /**
   * The response last done (its `close`) when its request's body had not all arrived then: a refusal
   * kept alive while a small body drains, an upstream's early answer. Node reads and drops the rest of
   * that body (`req._dump`), and a parser error in it (a bad chunk, the client's FIN) belongs to that
   * request, already answered. Not set for a request whose body was complete; cleared by the next
   * request (its body was complete, then).
   */
  done?: ServerResponse;
}

/**
 * Most requests of one connection parsed and not answered yet, or parsed and never to be handled
 * while the connection closes; one more of either cuts the connection. Node
 * parses pipelined requests as fast as their bytes come, with a request and a response object each,
 * whatever answers them: one client pipelining a flood of small requests behind a slow one grew the
 * heap by 1.6 GB in 4.5 s. No real client pipelines this deep (browsers do not pipeline at all).
 */
export const MAX_PIPELINED = 64;

/** Where a parser error's response goes (see {@link pipelineInOrder}'s `onParserError`). */
type ParserErrorTurn =
  /** Sent now: nothing of the connection is unanswered, or the error is in the body of the request being handled. */
  | 'now'
  /** Sent once the responses before it are done. */
  | 'deferred'
  /** Not sent: the error is in the body of the request being handled, whose response already started. */
  | 'started'
  /**
   * Not sent: the error is in the body of the request being handled, whose response is already whole
   * (a refusal that did not read the body, kept alive while it drains; an upstream's early answer):
   * the connection closes in stages after it.
   */
  | 'answered';

/**
 * Whether the connection closes after this response (RFC 9112 §9.3, §9.6): a `close` connection option,
 * or HTTP/1.0 (or 0.9) without `keep-alive` — as Node's parser reads it, which takes
 * `Proxy-Connection: keep-alive` for one (`res.shouldKeepAlive`, set as the response is created). Read
 * from `Connection` alone, an HTTP/1.0 request with `Proxy-Connection: keep-alive` was kept alive by
 * Node and taken for closing here: the client's next request was never answered, nor its connection
 * closed (review of fix 164).
 */
function asksToClose(res: ServerResponse): boolean {
  return !res.shouldKeepAlive;
}

/**
 * Keeps the chunked transfer coding away from a response to an HTTP/1.0 (or 0.9) request: RFC 9112
 * §6.1 says a server MUST NOT send `Transfer-Encoding` unless the request indicates HTTP/1.1. Node
 * chunks such a response when the request carries `TE: chunked` (`useChunkedEncodingByDefault`, set
 * from the request's `TE` when the response is created), and then also promises keep-alive to a client
 * that asked for it: an HTTP/1.0 client (or an HTTP/1.0 proxy in front that passed an HTTP/1.1 client's
 * `TE` on) reads the chunk sizes as body and waits for a close that does not come. Without it, a
 * response of unknown length goes close-delimited, with `Connection: close`, as to any HTTP/1.0 client.
 * @example neverChunkedForHttp10(req, res) // `GET / HTTP/1.0` + `TE: chunked` → close-delimited
 */
function neverChunkedForHttp10(req: IncomingMessage, res: ServerResponse): void {
  if (isHttp10OrOlder(req.httpVersion)) res.useChunkedEncodingByDefault = false;
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
 * done (its `close`). It is never handled when, by then or on arrival, the connection is closing: the
 * client asked (`Connection: close`, HTTP/1.0 without keep-alive), or the response before it closes the
 * connection (Node ends the socket at that response's finish, before its `close`: the socket is no
 * longer writable), or the parser failed. Such a request gets no response; the connection closes.
 *
 * A parser error is answered in its turn ({@link ParserErrorTurn}): after the responses to the
 * complete requests before it. An error inside a request's body belongs to that request: answered now
 * when it is the one being handled (or the connection is closed, if its response already started; or
 * closed in stages with nothing more written, if its response is already done while the body still
 * arrives: one request never gets two responses), else in its turn, the request itself never handled.
 *
 * At most {@link MAX_PIPELINED} requests of a connection wait; one more cuts the connection. Requests
 * that will never be handled are read and dropped, their bodies with them, while the connection closes
 * in stages; one more than {@link MAX_PIPELINED} of them cuts it. Per request: a map lookup, an array
 * push and shift, and one `close` listener (a shared function).
 * @returns The listener for the server's `request`, `checkContinue` and `checkExpectation` events, and
 *   the `clientError` handler's part: where a parser error's response goes.
 */
function pipelineInOrder(handler: RequestListener): {
  onRequest: RequestListener;
  /**
   * Sends `respond` now or stores it for its turn, and says which (`started`, `answered`: not at all).
   * Called once per connection (the `clientError` handler ignores the errors that follow). `status`
   * is the refusal's: when it answers the request being handled (an error in its body), that
   * request's log line says it, not the 200 its response never sent.
   */
  onParserError(socket: Duplex, status: number, respond: () => void): ParserErrorTurn;
  /**
   * The response of the request being handled on `socket` (or of the last one, already done) when its
   * body has not all arrived and no other request of the connection waits: where the client's end of
   * input (a FIN) mid-body lands.
   */
  cutShort(socket: Duplex): ServerResponse | undefined;
} {
  const pipelines = new WeakMap<Duplex, Pipeline>();
  const open = (socket: Duplex) => !socket.destroyed && socket.writable;
  // One function for every response's `close`, no closure per request.
  function onClose(this: ServerResponse) {
    const socket = this.req.socket;
    noteAnswered(socket);
    const pipeline = pipelines.get(socket);
    if (pipeline === undefined || pipeline.unanswered[0] !== this) return;
    pipeline.unanswered.shift();
    // Kept only while its body still arrives: a whole exchange held until the connection's next request
    // cost ~13 KB per idle keep-alive connection (its request, hooks and state).
    pipeline.done = this.req.complete ? undefined : this;
    const failed = pipeline.failed;
    if (failed !== undefined && --failed.remaining <= 0) {
      pipeline.unanswered.length = 0;
      if (open(socket)) failed.respond();
      return;
    }
    const head = pipeline.unanswered[0];
    if (head !== undefined && open(socket)) handler(head.req, head);
    else dropWaiting(pipeline);
  }
  /**
   * The response of the request whose body the parser is in, or the last request's when every request
   * is answered: the waiting last, else the one done last while its body still arrives (`done`).
   */
  function current(pipeline: Pipeline): ServerResponse | undefined {
    const last = pipeline.unanswered.at(-1);
    if (last !== undefined) return last;
    const done = pipeline.done;
    return done !== undefined && !done.req.complete ? done : undefined;
  }
  /**
   * Drops the requests still waiting their turn when the response before them closed the connection:
   * never handled, and their bodies read and dropped like those of the requests parsed after the close
   * (RFC 9112 §9.6). Left unread, a waiting request's body stopped the socket's reads (Node pauses the
   * connection on a request body nobody reads): an HTTP/1.0 keep-alive client that had pipelined a POST
   * behind a close-delimited response blocked mid-upload until the linger's reset (5 s), and a client
   * that writes its requests before reading could lose the response with it.
   */
  function dropWaiting(pipeline: Pipeline) {
    for (const res of pipeline.unanswered) {
      res.req.resume();
      pipeline.ignored++;
    }
    pipeline.unanswered.length = 0;
  }
  return {
    onRequest(req, res) {
      neverChunkedForHttp10(req, res);
      const socket = req.socket;
      let pipeline = pipelines.get(socket);
      if (pipeline === undefined) {
        pipeline = { unanswered: [], closing: false, ignored: 0 };
        pipelines.set(socket, pipeline);
      }
      pipeline.done = undefined;
      if (pipeline.closing || pipeline.failed !== undefined || !open(socket)) {
        // Never handled: the client asked to close before it, the parser failed, or the connection
        // closes in stages after a response that closed it (it lingers, reading and dropping what the
        // client still sends, runtime.ts). A client that pipelines behind a response it could not know
        // would close (HTTP/1.0 keep-alive, a body of unknown length) sends such requests in good
        // faith: cutting the connection on the first one reset it under a client still sending, which
        // then lost the response (httperf: EPIPE, the reply never read; RFC 9112 §9.6). Its body is
        // read and dropped with the rest; a flood of them is cut below.
        req.resume();
        if (++pipeline.ignored > MAX_PIPELINED) socket.destroy();
        return;
      }
      if (pipeline.unanswered.length >= MAX_PIPELINED) {
        // One too many pipelined: the client sends requests faster than they are answered. The
        // connection is cut, so that they cannot pile up (each request Node parses is kept until the
        // connection closes).
        socket.destroy();
        return;
      }
      if (asksToClose(res)) pipeline.closing = true;
      pipeline.unanswered.push(res);
      res.on('close', onClose);
      if (pipeline.unanswered.length === 1) handler(req, res);
    },
    onParserError(socket, status, respond) {
      const pipeline = pipelines.get(socket);
      const last = pipeline === undefined ? undefined : current(pipeline);
      if (pipeline === undefined || last === undefined) {
        respond();
        return 'now';
      }
      const { unanswered } = pipeline;
      const inBody = !last.req.complete;
      // The request being handled, or one answered whose body still arrives (no other can follow it).
      if (inBody && unanswered.length <= 1) {
        if (last.writableEnded) return 'answered';
        if (last.headersSent) return 'started';
        // The refusal is this request's answer: its log line says so, and its exchange ends here.
        respond();
        markAnsweredByServer(last, status);
        return 'now';
      }
      // Every request before the error is served first (all but the broken one, for an error in a body).
      pipeline.failed = { respond, remaining: inBody ? unanswered.length - 1 : unanswered.length };
      return 'deferred';
    },
    cutShort(socket) {
      const pipeline = pipelines.get(socket);
      if (pipeline === undefined || pipeline.unanswered.length > 1) return undefined;
      const only = current(pipeline);
      return only !== undefined && !only.req.complete ? only : undefined;
    },
  };
}

/**
 * Creates the front-door server (not listening).
 * @param handler The request pipeline (the Express app); it sees one request of a connection at a time
 *   (see {@link pipelineInOrder}), including those with an `Expect` other than `100-continue` (which
 *   Node would answer itself; the pipeline answers 417), those with `Expect: 100-continue` (no
 *   automatic `100 Continue`: the pipeline sends it once it admits the request) and HTTP/1.1 requests
 *   without `Host` (the pipeline answers 400, RFC 9112 §3.2).
 * @param onRejected Told of every request the server refuses itself (parser errors, oversized heads,
 *   timeouts, upgrades), which never reach the pipeline's metrics and log.
 * @param ownHeaders The headers every response the shim makes itself carries besides its framing, flat
 *   `[name, value, …]`, read when such a response is written: the service version once known (SPEC §7).
 * @returns The server, not yet listening, with the shim's timeouts (ms), head size limit and refusals.
 * @throws Nothing.
 */
export function createFrontServer(
  handler: RequestListener,
  onRejected: (reason: ServerRejection, status: number) => void = () => {},
  ownHeaders: () => readonly string[] = () => [],
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
  // The keep-alive timeout (the only socket timeout of this server: its `timeout` is 0). Node destroys
  // the socket when nothing listens here; after a stop of the shim longer than keepAliveTimeout (SIGSTOP,
  // a VM live migration) it did so with the client's next request unread in the kernel: a reset for a
  // request sent on time. The socket is read first (own-pause.ts); a request that came meanwhile has
  // cleared the timer (Node's `resetSocketTimeout`), and an idle connection closes as before
  // (docs/reliability.md fix 101).
  server.on('timeout', (socket: net.Socket) =>
    afterPendingIo(
      () => socket.bytesRead,
      (moved) => {
        if (!moved) socket.destroy();
      },
    ),
  );
  // Node answers an unknown expectation with its own bare 417; the hygiene gate answers it instead.
  server.on('checkExpectation', pipeline.onRequest);
  // Node would answer `Expect: 100-continue` with `100 Continue` at once, before any check: the
  // forwarder sends it once the request is admitted (forward.ts), so that a refused upload is refused
  // before its body is sent (RFC 9110 §10.1.1).
  server.on('checkContinue', pipeline.onRequest);
  /** A refusal of the server's own, with the headers of every shim-made response. */
  const refuse = (socket: Duplex, reason: ServerRejection, message = REFUSAL_MESSAGES[reason]) =>
    writeRaw(socket, REJECTION_STATUS[reason], message, ownHeaders());
  /**
   * Refuses a request Node handed over with its bare socket (an upgrade, a CONNECT). Node has detached
   * its HTTP parser and its own listeners from that socket, `'error'` and `'drain'` among them: an
   * error unheard would be thrown and end the process (a client resetting right after such a request,
   * test/security/h2c-upgrade-smuggling.test.ts), and a response still being written for a request
   * pipelined before it would never hear `'drain'` again. The refusal takes its turn after the
   * responses to those requests (RFC 9112 §9.3.2), as a parser error does.
   */
  const refuseHandedOver = (socket: Duplex, reason: ServerRejection, message = REFUSAL_MESSAGES[reason]) => {
    socket.on('error', ignoreError);
    socket.on('drain', () => relayDrain(socket));
    onRejected(reason, REJECTION_STATUS[reason]);
    pipeline.onParserError(socket, REJECTION_STATUS[reason], () => refuse(socket, reason, message));
  };
  // WebSocket and other upgrades never pass through Express middleware: refuse them here (SPEC §3).
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => refuseHandedOver(socket, 'upgrade'));
  // CONNECT (authority-form) never reaches Express either; without a listener Node drops the
  // connection without a word. Answer as hygiene does (SPEC §3; test/security/admission-bypass-by-path.test.ts).
  server.on('connect', (_req: IncomingMessage, socket: Duplex) =>
    refuseHandedOver(socket, 'malformed', CONNECT_REFUSED_MESSAGE),
  );
  // Connections whose parser error has been dealt with: the parser, failed, reports every later read
  // again; those are neither answered nor counted (the connection is closing, in stages).
  const settled = new WeakSet<Duplex>();
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    if (err.code === 'HPE_INVALID_EOF_STATE' && !settled.has(socket)) {
      const cut = pipeline.cutShort(socket);
      if (cut !== undefined) {
        // The client closed its side in the middle of the body of the request being handled: an
        // aborted upload (Caddy and Go's transport pass their client's abort on as a FIN), not a
        // malformed request — neither answered nor counted; the request's own log line says
        // `aborted: true`, and its upstream request never gets the body's end. A response already
        // whole (a refusal that left the body unread) still reaches a client that reads after its FIN.
        settled.add(socket);
        if (cut.writableEnded) closeInStages(socket);
        else socket.destroy();
        return;
      }
    }
    // Already closing (a response that closes the connection is out, or an error was answered): what
    // the client still sends is read and dropped until the close, never answered with a reset.
    if (settled.has(socket) || !socket.writable) return;
    settled.add(socket);
    const reason: ServerRejection =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? 'header_size'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'request_timeout'
          : 'malformed';
    // In its turn, after the responses to the complete requests before it (RFC 9112 §9.3.2;
    // test/security/request-smuggling.test.ts › pipelined).
    const turn = pipeline.onParserError(socket, REJECTION_STATUS[reason], () => refuse(socket, reason));
    if (turn === 'started') {
      // The error is in the body of a request whose response is being sent: a second response would
      // desynchronize a front proxy's response queue, and the first cannot be completed as framed.
      // Close at once, as Node's default handler does (lib/_http_server.js socketOnError);
      // test/security/request-smuggling.test.ts.
      socket.destroy();
      return;
    }
    // A whole response (a refusal that left the body unread) is never followed by a second one.
    if (turn === 'answered') closeInStages(socket);
    onRejected(reason, REJECTION_STATUS[reason]);
  });
  return server;
}

/** Errors of a socket the HTTP server no longer listens to: the socket is destroyed with them, nothing to do. */
function ignoreError(): void {}

/**
 * Relays a socket's `'drain'` to the response being written on it, as Node's server does until it
 * hands the socket over (lib/_http_server.js `socketOnDrain`): once the response has nothing pending.
 */
function relayDrain(socket: Duplex): void {
  const res = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (res && !res.writableEnded && res.writableNeedDrain && res.writableLength === 0) res.emit('drain');
}

/**
 * Longest the staged close after a refusal the server writes itself lingers in all (ms): a head it
 * could not parse, that never finished (`headersTimeout`'s 408, a slowloris) or that was too large, an
 * upgrade, a CONNECT; and the body errors it answers itself (a malformed chunk: fix 156's 400;
 * `requestTimeout`'s 408 mid-upload). Nothing the client sends after such a refusal is an upload to let
 * finish, and the linger must not stretch the bound `headersTimeout` puts on a slowloris (15 s; a
 * client sending a header line every 3 s was held 45 s with runtime.ts's 30 s `LINGER_MS`;
 * docs/reliability.md fix 155).
 */
export const HEAD_REFUSAL_LINGER_MS = 5_000;

/**
 * Ends the connection after what was written: with the runtime's staged close when it has one
 * (runtime.ts overrides each connection's `destroySoon`: FIN, then what the client still sends is read
 * and dropped, at most `LINGER_MS` — or `lingerMs`, given here — and 5 s without a byte, so that a
 * client still sending reads the response and a half-open one cannot hold the connection), else with a
 * plain `end()` (Node's own `destroySoon` would destroy the socket under a client still sending, which
 * resets the connection and can lose the response).
 */
function closeInStages(socket: Duplex, lingerMs?: number): void {
  const destroySoon = (socket as Duplex & { destroySoon?: (lingerMs?: number) => void }).destroySoon;
  if (destroySoon !== undefined && destroySoon !== net.Socket.prototype.destroySoon)
    destroySoon.call(socket, lingerMs);
  else socket.end();
}

/**
 * Writes a shim-made error straight to the socket (errors.ts {@link errorHead}, as respond.ts
 * `sendError` sends it, with `extra` and `Connection: close`), then closes the connection in stages.
 */
function writeRaw(socket: Duplex, status: number, message: string, extra: readonly string[]): void {
  const { headers, body } = errorHead(status, message, extra);
  // RFC 9110 §6.6.1: an origin server with a clock sends Date on every 2xx–4xx response, its own too.
  headers.push('Date', new Date().toUTCString(), 'Connection', 'close');
  let head = `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n`;
  for (let i = 0; i + 1 < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  socket.write(`${head}\r\n${body.toString('utf8')}`);
  closeInStages(socket, HEAD_REFUSAL_LINGER_MS);
}
