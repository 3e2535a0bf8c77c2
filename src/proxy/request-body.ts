/**
 * The request-body seam: bounded buffering of a request body for a rewrite, and the rewrite itself
 * (SPEC §4, §5: `MAX_REWRITE_BODY` → 413; SPEC §2: `MAX_BUFFERED_BYTES` → 503, `BODY_TIMEOUT_MS` → 408).
 */
import type { IncomingMessage } from 'node:http';
import type { Reservation } from '../core/buffer-budget.ts';
import { ShimError } from '../core/errors.ts';
import type { ExchangeHooks } from '../core/types.ts';
import { releaseChunk } from './body-pump.ts';
import {
  DecodedTooLargeError,
  declaredWindowBytes,
  decodeBody,
  encodeBody,
  SUPPORTED_CODINGS,
  type SupportedCoding,
  supportedCoding,
} from './content-coding.ts';

/** The client went away while the body was being read; nothing is sent back. */
export class ClientAbortedError extends Error {
  constructor() {
    super('client aborted the request body');
    this.name = 'ClientAbortedError';
  }
}

/** Options of {@link readBoundedBody} beyond the size limit. */
export interface BodyReadOptions {
  /**
   * The exchange's share of the process-wide budget, reserved as the body's bytes arrive (a declared
   * `Content-Length` that does not fit the room left fails at once, reserving nothing). Released here
   * on failure; on success it stays held until the caller releases it (when the body has been
   * forwarded or the exchange ends).
   */
  readonly reservation?: Reservation;
  /** Aborted when the body must have arrived (`BODY_TIMEOUT_MS` from the request head) → 408. */
  readonly signal?: AbortSignal;
  /**
   * Called once, when every check that needs no byte of the body has passed (declared length, budget,
   * deadline), just before the body is read: where `100 Continue` goes (RFC 9110 §10.1.1), so that a
   * request refused on its head is refused before its client sends the body.
   */
  readonly beforeRead?: () => void;
}

/**
 * Reads a whole request body into memory, never holding more than `limit` bytes.
 * A declared `Content-Length` above the limit fails before any byte is read.
 * @param req The request; must not have been read yet.
 * @param limit Maximum body size in bytes.
 * @param options Budget reservation and deadline (see {@link BodyReadOptions}).
 * @returns The body (an empty Buffer when there is none).
 * @throws {ShimError} `size` (413) when the body exceeds `limit`; `buffer_budget` (503) when the
 *   process-wide budget has no room; `body_timeout` (408) when `signal` aborts first. The request
 *   stream is left paused (the caller closes the connection).
 * @throws {ClientAbortedError} when the client disconnects or the stream fails mid-body.
 */
export async function readBoundedBody(
  req: IncomingMessage,
  limit: number,
  options: BodyReadOptions = {},
): Promise<Buffer> {
  return (await readBody(req, limit, options, 'refuse')).bytes;
}

/** What {@link readBodyStart} read: the whole body, or its first bytes with the rest still to come. */
export interface BodyStart {
  /** The bytes read, in order (an empty Buffer for an empty body). */
  readonly bytes: Buffer;
  /** `true` when `bytes` is the whole body; `false` when the rest is still unread in `req` (paused). */
  readonly complete: boolean;
}

/**
 * Reads a request body until it ends or `limit` bytes have arrived, whichever is first: what
 * `REQUEST_BUFFER_BYTES` holds of a body of a declared length before the upstream is contacted
 * (forward.ts; a chunked body is streamed instead), so that a client that trickles its body holds no
 * upstream connection, whatever length it declares (slowhttptest -B, R.U.D.Y.). nginx reads the whole
 * body first (`proxy_request_buffering`, to disk beyond its memory buffer); the shim holds at most this
 * much in memory, then streams the rest. A body without a declared length is read the same way.
 * The chunk that reaches the limit is kept whole: at most `limit` plus one chunk (64 KiB) is held.
 * @param req The request; must not have been read yet.
 * @param limit Bytes to read before giving the body back incomplete; above 0.
 * @param options Budget reservation (the bytes held; a declared length that could not fit the
 *   smaller of itself and `limit` fails at once), deadline (`BODY_TIMEOUT_MS`) and `beforeRead`.
 * @returns The whole body, or its first bytes with `complete: false` and `req` left paused, its other
 *   listeners untouched: the caller writes the bytes upstream, then resumes `req` into the same pump.
 * @throws {ShimError} `buffer_budget` (503), `body_timeout` (408) when `signal` aborts before the body
 *   ended or reached `limit`. The request stream is left paused (the caller closes the connection).
 * @throws {ClientAbortedError} when the client disconnects or the stream fails first.
 */
export function readBodyStart(
  req: IncomingMessage,
  limit: number,
  options: BodyReadOptions = {},
): Promise<BodyStart> {
  return readBody(req, limit, options, 'stop');
}

/**
 * The reader of {@link readBoundedBody} and {@link readBodyStart}: at `limit`, refuses the body (413)
 * or stops and gives back what it read.
 */
function readBody(
  req: IncomingMessage,
  limit: number,
  options: BodyReadOptions,
  atLimit: 'refuse' | 'stop',
): Promise<BodyStart> {
  const { reservation, signal } = options;
  const header = req.headers['content-length'];
  const declared = header === undefined ? undefined : Number(header);
  if (atLimit === 'refuse' && declared !== undefined && declared > limit) {
    return Promise.reject(tooLarge(limit));
  }
  // A declared length that does not fit the room left is refused at once, before its client sends it;
  // one that fits is reserved only as its bytes arrive. Reserved whole from the head, a declared
  // length cost a client nothing to hold: 64 heads declaring 1 MiB and sending nothing held the whole
  // budget until their BODY_TIMEOUT_MS (slowhttptest -B; test/security/slow-clients.test.ts).
  if (reservation && declared !== undefined && !reservation.fits(Math.min(declared, limit))) {
    return Promise.reject(overBudget());
  }
  if (signal?.aborted) {
    reservation?.release();
    return Promise.reject(timedOut());
  }
  options.beforeRead?.();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let reserved = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      signal?.removeEventListener('abort', onAbort);
    };
    const fail = (err: Error) => {
      cleanup();
      req.pause();
      // Dropped: their memory goes back now, not at a later collection (body-pump.ts).
      for (const chunk of chunks) releaseChunk(chunk);
      chunks.length = 0;
      reservation?.release();
      reject(err);
    };
    const give = (complete: boolean) => {
      cleanup();
      if (chunks.length === 1) return resolve({ bytes: chunks[0] as Buffer, complete });
      const bytes = chunks.length === 0 ? Buffer.alloc(0) : Buffer.concat(chunks, size);
      // Copied into the body: their memory goes back now (body-pump.ts).
      for (const chunk of chunks) releaseChunk(chunk);
      resolve({ bytes, complete });
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit && atLimit === 'refuse') return fail(tooLarge(limit));
      if (reservation && size > reserved) {
        if (!reservation.grow(size - reserved)) return fail(overBudget());
        reserved = size;
      }
      chunks.push(chunk);
      // A declared length up to the limit is read to its end: whole, it goes upstream with its length.
      if (size >= limit && atLimit === 'stop' && !(declared !== undefined && declared <= limit)) {
        // The rest stays in the request, paused, for the caller's pump.
        req.pause();
        give(false);
      }
    };
    const onEnd = () => give(true);
    const onError = () => fail(new ClientAbortedError());
    const onClose = () => {
      if (!req.complete) onError();
    };
    // The deadline (408), or the exchange ended under the read (a ClientAbortedError as the reason).
    const onAbort = () => fail(signal?.reason instanceof ClientAbortedError ? signal.reason : timedOut());
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Buffers a request body (bounded), undoes its `Content-Encoding`, runs the body rewrites and redoes
 * the encoding when anything changed (RFC 9110 §8.4).
 *
 * A body that decodes to no bytes (a chunked body of only its last chunk, `0\r\n\r\n`, or a gzip
 * stream of nothing) has nothing to rewrite: the rewrites are not called and the client's bytes go
 * upstream as they came, as a `Content-Length: 0` request's do (which never reaches this seam). The
 * caller frames what it returns with a `Content-Length` (RFC 9112 §6.2), so an empty chunked body
 * arrives as `Content-Length: 0`.
 * @param req The request, unread.
 * @param rewrites The hooks with a `body` rewrite, in plugin order.
 * @param limit `MAX_REWRITE_BODY` in bytes (encoded and decoded).
 * @param options Budget reservation (the decoded copy is reserved too; released here when the body is
 *   refused, held on success until the caller releases it) and deadline.
 * @returns The body to forward: the client's own bytes when the body is empty or no rewrite changed
 *   anything.
 * @throws {ShimError} `size` (413) above `limit` bytes (encoded or decoded), `encoding` (415) for a
 *   content coding the shim cannot undo, `body` (400) for a body that does not decode,
 *   `buffer_budget` (503), `body_timeout` (408), and whatever the rewrites throw.
 * @throws {ClientAbortedError} when the client goes away mid-body.
 */
export async function rewriteRequestBody(
  req: IncomingMessage,
  rewrites: readonly ExchangeHooks[],
  limit: number,
  options: BodyReadOptions = {},
): Promise<Buffer> {
  const coding = supportedCoding(req.headers['content-encoding']);
  if (coding === undefined) {
    throw new ShimError(
      'encoding',
      `The request body uses a Content-Encoding this proxy cannot rewrite; send it as ${CODING_NAMES}.`,
    );
  }
  const raw = await readBoundedBody(req, limit, options);
  try {
    return await rewriteReadBody(raw, coding, rewrites, limit, options.reservation);
  } catch (err) {
    // A body refused after it was read holds nothing, as readBoundedBody's refusals: the exchange's
    // end (the response's 'close', forward.ts) releases the reservation too, but it may have passed
    // while the body was decoded (the client gone meanwhile), and the decoded copy reserved after it
    // was never given back (docs/reliability.md fix 109).
    options.reservation?.release();
    throw err;
  }
}

/**
 * The part of {@link rewriteRequestBody} after the read: decode, rewrite, encode again.
 * @param raw The body as the client sent it.
 * @param coding Its content coding.
 * @param rewrites The hooks with a `body` rewrite, in plugin order.
 * @param limit `MAX_REWRITE_BODY` in bytes (decoded).
 * @param reservation The exchange's reservation, grown by the decoded copy.
 * @returns The body to forward.
 * @throws {ShimError} as {@link rewriteRequestBody}, and whatever the rewrites throw.
 */
async function rewriteReadBody(
  raw: Buffer,
  coding: SupportedCoding,
  rewrites: readonly ExchangeHooks[],
  limit: number,
  reservation: Reservation | undefined,
): Promise<Buffer> {
  let body = raw;
  if (coding !== 'identity') {
    // The decode's own memory, reserved while it runs: its window and its output, up to the limit. Not
    // counted, 200 concurrent 204-byte brotli bodies (100 MB of whitespace each) took the shim past 1 GB
    // before their 413s (docs/reliability.md fix 134).
    const working = declaredWindowBytes(coding, raw) + limit;
    if (reservation && !reservation.grow(working)) throw overBudget();
    try {
      body = await decodeBody(raw, coding, limit);
    } catch (err) {
      if (err instanceof DecodedTooLargeError) {
        throw new ShimError(
          'size',
          `The decoded request body is larger than the ${limit} bytes this proxy rewrites (MAX_REWRITE_BODY).`,
        );
      }
      throw new ShimError('body', `The request body is not valid ${coding} data.`);
    } finally {
      reservation?.shrink(working);
    }
    if (reservation && !reservation.grow(body.length)) throw overBudget();
  }
  if (body.length === 0) return raw;
  const decoded = body;
  for (const hooks of rewrites) body = hooks.body?.rewrite(body) ?? body;
  if (body === decoded) return raw;
  return coding === 'identity' ? body : encodeBody(body, coding);
}

/** The codings a rewritten request body may use, for the 415 message: `identity, gzip, deflate, br or zstd`. */
const CODING_NAMES = `${SUPPORTED_CODINGS.slice(0, -1).join(', ')} or ${SUPPORTED_CODINGS.at(-1)}`;

/** A request body larger than this is not drained when the shim rejects early; the connection closes instead. */
const DRAIN_LIMIT = 64 * 1024;

/**
 * Whether an unread request body remains that is too large to drain before responding (the shim's
 * own error then closes the connection).
 * @param req The request.
 * @returns true for a chunked body or a declared length above 64 KiB that has not ended.
 * @throws Nothing.
 */
export function hasLargeUnreadBody(req: IncomingMessage): boolean {
  if (req.readableEnded) return false;
  if (req.headers['transfer-encoding'] !== undefined) return true;
  return Number(req.headers['content-length'] ?? 0) > DRAIN_LIMIT;
}

function tooLarge(limit: number): ShimError {
  return new ShimError(
    'size',
    `The request body is larger than the ${limit} bytes this proxy rewrites (MAX_REWRITE_BODY); send a smaller body.`,
  );
}

function overBudget(): ShimError {
  return new ShimError(
    'buffer_budget',
    'The proxy is holding as many request bodies as it may (MAX_BUFFERED_BYTES); retry after the Retry-After delay.',
  );
}

function timedOut(): ShimError {
  return new ShimError(
    'body_timeout',
    'The request body did not arrive in time (BODY_TIMEOUT_MS); send the whole body promptly.',
  );
}
