/**
 * The response-patch seam (SPEC §6; issue 9 item 1): how a response a plugin asked to patch goes
 * (`patchPlan`), the reservation of a coded response's decoder window (`reserveDecoderWindow`), the
 * plugins' streaming patches of one response body, chained, and the pumps that feed them — the
 * upstream's chunks straight to the client (`pumpPatch`), or between the decoder and the encoder of a
 * content coding (`pumpCodedPatch`). Bytes leave as they arrive; only what a patch holds back (bounded
 * by the patch itself) stays in memory.
 */
import type { Transform } from 'node:stream';
import { Reservation, requestBodyCeiling } from '../core/buffer-budget.ts';
import type { BufferBudget, PatchOutcome, PatchSkipReason, ResponsePatch } from '../core/types.ts';
import { pauseUntilDrain, releaseChunk } from './body-pump.ts';
import {
  declaredWindowBytes,
  SUPPORTED_CODINGS,
  type SupportedCoding,
  supportedCoding,
} from './content-coding.ts';

/** How a response that a plugin asked to patch goes to the client ({@link patchPlan}). */
export type PatchPlan =
  /** No body (the answer to a HEAD, a 204, 205 or 304): the head the patched GET would carry, alone. */
  | { readonly kind: 'head' }
  /**
   * Passed through as it comes, unpatched: a content coding the shim cannot undo
   * (`unsupported_encoding`, counted, whatever the status), or a 206 (`reason` undefined: a part is not
   * a document).
   */
  | { readonly kind: 'pass'; readonly reason: 'unsupported_encoding' | undefined }
  /** Patched as it comes; through a decoder and an encoder unless `coding` is `identity`. */
  | { readonly kind: 'patch'; readonly coding: SupportedCoding };

const HEAD_PLAN: PatchPlan = { kind: 'head' };
const PARTIAL_PLAN: PatchPlan = { kind: 'pass', reason: undefined };
const UNSUPPORTED_PLAN: PatchPlan = { kind: 'pass', reason: 'unsupported_encoding' };
const PATCH_PLANS = new Map<SupportedCoding, PatchPlan>(
  SUPPORTED_CODINGS.map((coding) => [coding, { kind: 'patch', coding }]),
);

/**
 * Decides how a response that a plugin asked to patch (SPEC §6) goes to the client: its head alone, as
 * the upstream sent it, or patched (and through which coding). Pure; one plan object per outcome, made
 * once.
 * @param bodiless The response has no body (response-writer.ts `isBodiless`).
 * @param status The upstream's final status (a 206 is never patched: a part of a document is not one).
 * @param contentEncoding The upstream's `Content-Encoding`, as Node joined it, or `undefined`.
 * @returns The plan ({@link PatchPlan}). Never throws.
 * @example
 * patchPlan(false, 200, 'gzip') // → { kind: 'patch', coding: 'gzip' }
 * patchPlan(false, 200, 'gzip, br') // → { kind: 'pass', reason: 'unsupported_encoding' }
 * patchPlan(false, 206, undefined) // → { kind: 'pass', reason: undefined }
 * patchPlan(true, 304, undefined) // → { kind: 'head' }
 */
export function patchPlan(bodiless: boolean, status: number, contentEncoding: string | undefined): PatchPlan {
  if (bodiless) return HEAD_PLAN;
  const coding = supportedCoding(contentEncoding);
  // A coding the shim cannot undo is counted whatever the status, a 206 included (as before the plan).
  if (coding === undefined) return UNSUPPORTED_PLAN;
  if (status === 206) return PARTIAL_PLAN;
  return PATCH_PLANS.get(coding) as PatchPlan;
}

/** What {@link reserveDecoderWindow} reads: the upstream's response body, not yet read (an `IncomingMessage`). */
export interface UnreadBody {
  on(event: 'readable', listener: () => void): unknown;
  off(event: 'readable', listener: () => void): unknown;
  /** The bytes buffered so far, or `null` at the end of an empty body. */
  read(): Buffer | null;
  /** Puts bytes back in front of the body. */
  unshift(chunk: Buffer): unknown;
}

/**
 * Reserves from the budget the memory a patched response's decoder will hold: the window its body
 * declares in its first bytes (content-coding.ts `declaredWindowBytes`: brotli up to 16 MiB, zstd up to
 * 8 MiB, gzip and deflate 64 KiB), for as long as the response lasts. Not counted, 30 legacy clients
 * reading a brotli list with a 16 MiB window slowly took +526 MiB (docs/reliability.md fix 135).
 * Decoders may fill three quarters of the budget together, as request bodies may
 * (buffer-budget.ts `requestBodyCeiling`). Waits for the body's first bytes (or its end), puts them
 * back (`unshift`), then calls `then(true)` with the reservation given back when `res` closes, or
 * `then(false)` when the budget has no room (the caller sends the response unpatched,
 * `budget_exhausted`, as a patch does when it cannot hold a value).
 * @param source The upstream's response, not yet read.
 * @param res The client's response (its `close` gives the reservation back).
 * @param coding The response's content coding (not `identity`).
 * @param budget The process-wide budget (`MAX_BUFFERED_BYTES`).
 * @param then Told whether the window is reserved; called once, unless the source fails or closes first.
 * @throws Nothing of its own.
 */
export function reserveDecoderWindow(
  source: UnreadBody,
  res: { once(event: 'close', listener: () => void): unknown },
  coding: Exclude<SupportedCoding, 'identity'>,
  budget: BufferBudget,
  then: (reserved: boolean) => void,
): void {
  const onReadable = () => {
    source.off('readable', onReadable);
    const head = source.read();
    if (head !== null) source.unshift(head);
    // Within the request bodies' share (three quarters): the last quarter stays for the values the
    // patches of these responses hold, or decoders would leave every patch without room.
    const window = new Reservation(budget, requestBodyCeiling(budget));
    if (!window.grow(head === null ? 0 : declaredWindowBytes(coding, head))) {
      then(false);
      return;
    }
    res.once('close', () => window.release());
    then(true);
  };
  source.on('readable', onReadable);
}

/**
 * Chains patches: what the first returns for a chunk is written to the second, and so on; what the
 * last returns goes out. One patch is returned as it is.
 * @param patches At least one patch, in plugin order.
 * @returns A patch whose `outcome` is the first `skipped` outcome, else `patched` when any patched,
 *   else `unchanged`.
 * @throws {RangeError} for an empty list.
 */
export function chainPatches(patches: readonly ResponsePatch[]): ResponsePatch {
  if (patches.length === 0) throw new RangeError('chainPatches needs at least one patch');
  if (patches.length === 1) return patches[0] as ResponsePatch;
  const feed = (from: number, chunk: Buffer): Buffer => {
    let bytes = chunk;
    for (let i = from; i < patches.length && bytes.length > 0; i++)
      bytes = (patches[i] as ResponsePatch).write(bytes);
    return bytes;
  };
  return {
    write(chunk) {
      return feed(0, chunk);
    },
    end() {
      // What each patch still held goes through the patches after it, before they end in turn.
      const out: Buffer[] = [];
      for (let i = 0; i < patches.length; i++) {
        const bytes = feed(i + 1, (patches[i] as ResponsePatch).end());
        if (bytes.length > 0) out.push(bytes);
      }
      return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
    },
    recycle(bytes) {
      // Only what the last patch returned reaches the caller; earlier outputs may be held by later patches.
      (patches[patches.length - 1] as ResponsePatch).recycle?.(bytes);
    },
    destroy() {
      for (const p of patches) p.destroy();
    },
    get outcome(): PatchOutcome {
      return combinedOutcome(patches.map((p) => p.outcome));
    },
  };
}

/**
 * The outcome of several patches of one body: the first `skipped`, else `patched` if any, else `unchanged`.
 * @param outcomes Each patch's outcome, in the patches' order.
 * @returns The combined outcome (the `skipped` one itself, with its reason).
 * @throws Nothing.
 */
export function combinedOutcome(outcomes: readonly PatchOutcome[]): PatchOutcome {
  let patched = false;
  for (const o of outcomes) {
    if (o.kind === 'skipped') return o;
    if (o.kind === 'patched') patched = true;
  }
  return patched ? { kind: 'patched' } : { kind: 'unchanged' };
}

/**
 * Runs one body chunk through the patch (or, `chunk` undefined, ends it). A chunk the patch did not
 * return as it is has been copied, so its memory is released now (body-pump.ts `releaseChunk`). A patch
 * that throws breaks its contract (core/types.ts `ResponsePatch`): the error goes to `failed`, not out
 * of the stream listener that called this, which would end the process (fix 165).
 * @returns What the patch returned: write it with {@link whenWritten}'s callback; `undefined` when it
 *   threw.
 */
function patchChunk(
  patch: ResponsePatch,
  chunk: Buffer | undefined,
  failed: (err: unknown) => void,
): Buffer | undefined {
  try {
    if (chunk === undefined) return patch.end();
    const bytes = patch.write(chunk);
    if (bytes !== chunk) releaseChunk(chunk);
    return bytes;
  } catch (err) {
    failed(err);
    return undefined;
  }
}

/**
 * The write callback for what {@link patchChunk} returned: once the next step is done with the bytes
 * (the socket wrote them, the encoder consumed them; not after an error, when it may not be), a chunk
 * the patch passed on as it came is released, and a buffer of the patch's own goes back to it
 * (`recycle`) for its next chunk.
 */
function whenWritten(patch: ResponsePatch, chunk: Buffer, bytes: Buffer): (err?: Error | null) => void {
  return (err) => {
    if (err) return;
    if (bytes === chunk) releaseChunk(chunk);
    else patch.recycle?.(bytes);
  };
}

/**
 * What {@link pumpPatch} and {@link pumpCodedPatch} write to: the client's response (a `ServerResponse`
 * in the shim).
 */
export interface PatchTarget {
  /** Queues `chunk`; `callback` runs once the socket has written it (with an error if it could not). */
  write(chunk: Buffer, callback?: (err?: Error | null) => void): boolean;
  /**
   * Ends the response, after `chunk` if given (with the terminating chunk in one write); `callback`
   * runs once the response is finished (`finish`), not if it fails first.
   */
  end(chunk?: Buffer, callback?: () => void): void;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  /** `end()` was called: nothing more may be written. */
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
}

/** What {@link pumpPatch} and {@link pumpCodedPatch} tell their caller (one object per response). */
export interface PatchPumpEvents {
  /**
   * Writes the response head; called once, before the first body byte. `unpatched`: the patch has
   * skipped before changing a byte, for a reason another fetch may not repeat (a full budget, a
   * scanner failure), so the body is the upstream's as sent and its own head (length, tag) must go
   * instead of the patched one (fix 162). Only the uncoded pump can say so; the coded one re-encodes,
   * and says `false`.
   */
  writeHead(unpatched: boolean): void;
  /** Told the final outcome when the (decoded) body ended, before the response ends. */
  onEnd(outcome: PatchOutcome): void;
  /**
   * The upstream failed mid-body (or, coded, its body does not decode: zlib's `Z_*`, brotli's
   * `ERR__*`, zstd's `ZSTD_error_*`) while the client is still there: 502/504 if nothing was sent, else
   * an abort (the caller decides). Called once; not after the client went away.
   */
  onError(err: Error): void;
  /**
   * The patch threw, breaking its contract (core/types.ts `ResponsePatch`: never throws; a plugin's
   * bug): the pump has stopped reading the upstream and writes nothing more; the caller ends the
   * exchange. Called once, instead of the event the patch's call was for; an exception thrown out of a
   * stream listener would have ended the process, and every exchange with it.
   */
  onPatchFailure(err: Error): void;
}

/** `err` as an `Error` (a plugin may throw anything). */
function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * What {@link pumpPatch} and {@link pumpCodedPatch} read from: the upstream's response body (an
 * `IncomingMessage`), whose chunks nothing else reads.
 */
export interface PatchSource {
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  once(event: 'end', listener: () => void): unknown;
  once(event: 'error', listener: (err: Error) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  destroy(): unknown;
}

/**
 * Skips that another fetch of the same upstream bytes may not repeat: a full buffer budget, a failure of
 * the shim's scanner. Their body must not go under the patched tag, which a cache would revalidate to
 * 304s (fix 162). The others (`invalid_json`, `too_deep`, `value_too_large`) recur on every fetch of
 * those bytes, so the patched tag names one body, and keeps revalidation working.
 */
const TRANSIENT_SKIPS: ReadonlySet<PatchSkipReason> = new Set(['budget_exhausted', 'scanner_failed']);

/** Whether `outcome` is a skip that another fetch may not repeat ({@link TRANSIENT_SKIPS}). */
function skippedForNow(outcome: PatchOutcome): boolean {
  return outcome.kind === 'skipped' && TRANSIENT_SKIPS.has(outcome.reason);
}

/** The chunk of {@link pumpPatch}'s pending output before the first one. */
const NO_CHUNK = Buffer.alloc(0);

/**
 * Patches an uncoded response body from `source` to `target` without a stream pipeline: each
 * upstream chunk goes through `patch.write`, and what it returns is written as one HTTP chunk (the
 * head just before the first byte, or at the end of an empty body); a full client buffer pauses the
 * upstream until `drain`. Measured (bench/RESULTS.md): `stream.pipeline` with a Transform and a
 * Writable per patched response cost ~35 % of a patched 1.5 KB GET (Node's pipeline creates and aborts
 * an AbortController, with a DOMException, per call); this does the same work with four listeners.
 * A chunk the patch did not return as it is has been copied, so its memory is released at once, and
 * one it passed on once the socket has written it (body-pump.ts `releaseChunk`): `source` must hand
 * its chunks to this function alone.
 *
 * Each output is written in the microtask after its chunk's `data` event, not in it: an upstream body
 * whose last bytes and end arrive together (a `Content-Length` or chunked body read in one go) ends in
 * Node's `end` event, which comes before that microtask, and the last output then goes with the end of
 * the response (`target.end(bytes)`): one `writev` with the terminating chunk (RFC 9112 §7.1) instead
 * of a write syscall of 5 bytes and a TCP segment of their own for the client to read. Nothing waits
 * for more bytes: the write goes before the event loop reads any socket again. Measured on a legacy
 * client's 1,000-item list (bench/RESULTS.md, thirty-second session): 1.6 `write` syscalls a response
 * beside its 11 `writev`s instead of 2.5 (strace -c), and 0.92× the shim's CPU (bench/ab.ts, 8 rounds).
 *
 * @param source The upstream's response body; destroyed when the client goes away.
 * @param target The client's response.
 * @param patch The (chained) patch of this response; destroyed when the exchange is abandoned.
 * @param events `writeHead`, `onEnd`, `onError` ({@link PatchPumpEvents}).
 * @throws Nothing of its own: failures reach `events.onError`.
 */
export function pumpPatch(
  source: PatchSource,
  target: PatchTarget,
  patch: ResponsePatch,
  events: PatchPumpEvents,
): void {
  const { writeHead, onEnd, onError, onPatchFailure } = events;
  const hold = pauseUntilDrain(source, target);
  let broken = false;
  // The output not written yet (at most one), and the chunk it came from (whenWritten's).
  let pending: Buffer | undefined;
  let pendingChunk: Buffer = NO_CHUNK;
  const writePending = (): void => {
    const bytes = pending;
    if (bytes === undefined) return;
    pending = undefined;
    if (target.destroyed || target.writableEnded) return;
    if (!target.write(bytes, whenWritten(patch, pendingChunk, bytes))) hold();
  };
  const patchFailed = (err: unknown): void => {
    broken = true;
    writePending();
    source.destroy();
    onPatchFailure(asError(err));
  };
  source.on('data', (chunk) => {
    if (broken) return;
    const bytes = patchChunk(patch, chunk, patchFailed);
    // The patch threw; the client's response was cut, or already answered (the shim's 502 for an
    // upstream failure).
    if (bytes === undefined || bytes.length === 0 || target.destroyed || target.writableEnded) return;
    // The first bytes out: the chunk itself from a patch that has skipped means nothing was held or
    // changed before it, and the rest passes verbatim.
    if (!target.headersSent) writeHead(bytes === chunk && skippedForNow(patch.outcome));
    // Another chunk of the same read: the output before it goes first.
    writePending();
    pending = bytes;
    pendingChunk = chunk;
    queueMicrotask(writePending);
  });
  source.once('end', () => {
    if (broken) return;
    const bytes = patchChunk(patch, undefined, patchFailed);
    if (bytes === undefined) return;
    onEnd(patch.outcome);
    if (target.destroyed || target.writableEnded) return;
    if (!target.headersSent) writeHead(false);
    // The last output goes with the end of the response: the patch's own last bytes, after the pending
    // output; else the pending output, its callback once the response is finished.
    if (bytes.length > 0) {
      writePending();
      target.end(bytes);
      return;
    }
    const last = pending;
    pending = undefined;
    if (last === undefined) target.end();
    else target.end(last, whenWritten(patch, pendingChunk, last));
  });
  source.once('error', (err) => {
    patch.destroy();
    if (target.destroyed && !target.writableFinished) return; // the client went away: nothing to say
    onError(err);
  });
  target.once('close', () => {
    if (target.writableFinished) return;
    patch.destroy();
    source.destroy();
  });
}

/** The decoder and the encoder of a response with a content coding (content-coding.ts). */
export interface PatchCodec {
  /** Encoded bytes in, decoded bytes out (its chunks are the pump's alone: it releases them). */
  readonly decoder: Transform;
  /** Patched bytes in, encoded bytes out; a write's callback runs once it has consumed the chunk. */
  readonly encoder: Transform;
  /**
   * Makes the encoder emit what it holds, in order after what was written to it, without ending its
   * stream (zlib's `Z_SYNC_FLUSH`, brotli's and zstd's flush operations); absent: never flushed.
   */
  readonly flush?: () => void;
}

/**
 * Patches a response body with a content coding, wired by hand as {@link pumpPatch} is (no
 * `stream.pipeline`, no stage per patch): the upstream's chunks go to `codec.decoder`; each decoded
 * chunk goes through `patch.write`, and what it returns to `codec.encoder`; the encoder's output goes
 * to the client as it comes (the head just before its first byte). Each step pauses the one before it
 * while its buffer is full. Memory: a decoded chunk the patch copied is released at once, one it passed
 * on once the encoder has consumed it, and the patch's output buffer goes back to it then (`recycle`),
 * so a long response reuses one buffer (body-pump.ts `releaseChunk`).
 *
 * A body the upstream sends in pieces with pauses between them (a compressed stream it flushes piece
 * by piece, as Express' `compression` with `res.flush()` or nginx's gzip unbuffered do) reaches the
 * client piece by piece too: once the decoder has consumed every upstream chunk and handed out all it
 * decoded, and the upstream sends nothing more within that turn of the event loop, `codec.flush` makes
 * the encoder emit what it holds (at most once a turn, never after the upstream's end, which flushes
 * anyway). A body that arrives in one go, the common case, is flushed at most once before its end.
 *
 * Measured on a gzip upstream's 1.4 MB list for 32 concurrent legacy clients, fresh shims alternating
 * (bench/RESULTS.md, ninth session): 136–146 requests/s and a peak of +71 to +75 MiB above idle,
 * against 130–135 and +81/+83 for the `stream.pipeline` of decoder, patch stage, encoder and client
 * sink it replaces (which also made an AbortController per response).
 *
 * @param source The upstream's response body (encoded); destroyed when the exchange is abandoned.
 * @param target The client's response.
 * @param codec The response's decoder and encoder; destroyed when the exchange is abandoned.
 * @param patch The (chained) patch of this response; destroyed when the exchange is abandoned.
 * @param events `writeHead`, `onEnd` (the decoded body ended), `onError` (also a body that does not
 *   decode) ({@link PatchPumpEvents}).
 * @throws Nothing of its own: failures reach `events.onError`.
 */
export function pumpCodedPatch(
  source: PatchSource,
  target: PatchTarget,
  codec: PatchCodec,
  patch: ResponsePatch,
  events: PatchPumpEvents,
): void {
  const { writeHead, onEnd, onError, onPatchFailure } = events;
  const { decoder, encoder } = codec;
  let abandoned = false;
  const abandon = (): void => {
    abandoned = true;
    patch.destroy();
    source.destroy();
    decoder.destroy();
    encoder.destroy();
  };

  // The flush of a body sent in pieces: upstream chunks the decoder has not consumed yet, whether the
  // encoder got bytes since its last flush, and whether a check is already due at the end of the turn.
  let decoding = 0;
  let unflushed = false;
  let flushDue = false;
  let sourceEnded = false;
  const flushIfIdle = (): void => {
    flushDue = false;
    if (abandoned || sourceEnded || !unflushed || decoding > 0 || decoder.readableLength > 0) return;
    unflushed = false;
    codec.flush?.();
  };
  const checkFlush = (): void => {
    if (flushDue || codec.flush === undefined) return;
    flushDue = true;
    setImmediate(flushIfIdle);
  };
  const consumed = (): void => {
    if (--decoding === 0) checkFlush();
  };

  // upstream → decoder
  const holdSource = pauseUntilDrain(source, decoder);
  source.on('data', (chunk) => {
    if (abandoned) return;
    decoding++;
    if (!decoder.write(chunk, consumed)) holdSource();
  });
  source.once('end', () => {
    sourceEnded = true;
    if (!abandoned) decoder.end();
  });

  // decoder → patch → encoder
  const holdDecoder = pauseUntilDrain(decoder, encoder);
  const patchFailed = (err: unknown): void => {
    abandon();
    onPatchFailure(asError(err));
  };
  decoder.on('data', (decoded: Buffer) => {
    if (abandoned) return;
    const bytes = patchChunk(patch, decoded, patchFailed);
    if (bytes === undefined) return;
    if (bytes.length > 0) unflushed = true;
    // Decoded after its input was consumed: the decoder was paused and goes on now.
    if (decoding === 0) checkFlush();
    // The encoder's write callback: it has consumed them (zlib copies its input into its own window).
    if (bytes.length > 0 && !encoder.write(bytes, whenWritten(patch, decoded, bytes))) holdDecoder();
  });
  decoder.once('end', () => {
    if (abandoned) return;
    const bytes = patchChunk(patch, undefined, patchFailed);
    if (bytes === undefined) return;
    onEnd(patch.outcome);
    if (bytes.length > 0) encoder.write(bytes);
    encoder.end();
  });

  // encoder → client
  const holdEncoder = pauseUntilDrain(encoder, target);
  encoder.on('data', (encoded: Buffer) => {
    if (abandoned || target.destroyed || target.writableEnded) return;
    if (!target.headersSent) writeHead(false);
    if (!target.write(encoded)) holdEncoder();
  });
  encoder.once('end', () => {
    if (abandoned || target.destroyed || target.writableEnded) return;
    if (!target.headersSent) writeHead(false);
    target.end();
  });

  const fail = (err: Error): void => {
    if (abandoned) return;
    abandon();
    if (target.destroyed && !target.writableFinished) return; // the client went away: nothing to say
    onError(err);
  };
  source.once('error', fail);
  decoder.on('error', fail);
  encoder.on('error', fail);
  target.once('close', () => {
    if (!target.writableFinished && !abandoned) abandon();
  });
}
