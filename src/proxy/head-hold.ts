/**
 * How long a response head waits for its body. The shim writes an upstream response's head with the
 * first byte of its body (one write for both, and an upstream that fails in between still gets the
 * client a 502 or 504: docs/reliability.md fix 113). An upstream that sends its head and then waits —
 * server-sent events (`text/event-stream`) before their first event, a long poll, a stream that opens
 * with a slow query — would leave the client with nothing at all: no status, no headers, an
 * `EventSource` that does not open. nginx with `proxy_buffering off` and Envoy send a head as soon as
 * they have it. So the head waits for its body at most {@link HEAD_HOLD_MS}, then goes alone; from then
 * on the response has started, and a failure aborts it as for any started response (SPEC §6).
 */

import { ANSWERED_BY_SERVER, isAnsweredByServer } from '../core/exchange.ts';
import { type Deadline, startDeadline } from './own-pause.ts';

/**
 * The longest a response head waits for its body's first byte, in ms, before it is sent alone. Longer
 * than a body takes to follow its head from a live upstream (the same write, or the next packets);
 * short enough that a client of a stream sees the status at once.
 */
export const HEAD_HOLD_MS = 250;

/** The client's response, as {@link holdHead} sees it (a `ServerResponse` in the shim). */
export interface HeldResponse {
  /** The head was written (`writeHead`), sent or not yet. */
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  /** Sends a written head now, without waiting for the body (Node's `OutgoingMessage.flushHeaders`). */
  flushHeaders(): void;
  /**
   * The response closed (ended, answered otherwise, or its client gone), or the HTTP server answered
   * its request itself (`ANSWERED_BY_SERVER`): the hold ends with it.
   */
  once(event: 'close' | typeof ANSWERED_BY_SERVER, listener: () => void): unknown;
}

/** The timer functions {@link holdHead} uses: the shim's deadlines, or a test's own clock. */
export interface HoldTimers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
  /**
   * Runs `callback` once the code running now is done, with the `process.nextTick` callbacks it
   * queued (`queueMicrotask`: Node drains its nextTick queue before the microtasks).
   */
  defer(callback: () => void): void;
}

/**
 * A deadline that reads the I/O already in the kernel before it acts (own-pause.ts `startDeadline`): an
 * event loop stalled past the hold (a long collection, a throttled CPU, a stopped process) first reads
 * the body's first byte, or the upstream's reset (then answered 502 as before), instead of sending a
 * head that a failure read a moment later turns into an abort.
 */
const DEADLINES: HoldTimers = {
  set: (callback, ms) => startDeadline(callback, ms),
  clear: (handle) => (handle as Deadline).clear(),
  defer: queueMicrotask,
};

/** A response head waiting for its body ({@link holdHead}). */
export interface HeadHold {
  /**
   * Writes the head, unless it is written already, and ends the hold: call it just before the body's
   * first byte is written, or at the end of an empty body. Calling it again writes nothing more.
   */
  readonly start: () => void;
  /** Ends the hold without writing anything (the response takes another head: relay-response.ts). */
  readonly cancel: () => void;
}

/**
 * Bounds the wait of a response head for its body. If {@link HeadHold.start} has not been called after
 * `holdMs`, the head is written with `writeHead` and sent alone (`flushHeaders`), unless the response
 * was answered, ended or destroyed meanwhile (a 502, the client gone).
 *
 * Only for a response that may have a body (not a HEAD's, a 204's or a 304's, whose heads go out at
 * once). The hold is armed once the code running now is done, with the nextTick callbacks it queued
 * (`timers.defer`): the upstream's head and the first bytes of its body mostly come in one read, and
 * Node hands those bytes to the body's `data` listener in a nextTick callback, so such a response has
 * started by then and no timer is set for it. A `setTimeout` and `clearTimeout` per response, with the
 * two listeners below, cost 6–8 % of the shim's CPU per pass-through request, together with the tail's
 * write watch (upstream-attempt.ts; bench/RESULTS.md, "Thirty-third session"). Once armed, the hold
 * also ends when the response closes first (a 502, the client gone), so that it keeps nothing alive.
 * The deadline reads pending I/O before it acts (own-pause.ts `startDeadline`).
 * @param res The client's response.
 * @param writeHead Writes the head (`res.writeHead` with this response's head); called at most once,
 *   by `start` or by the timer.
 * @param holdMs The longest wait, in ms ({@link HEAD_HOLD_MS}), from the end of the code running now.
 * @param timers The clock (Node's timers and microtasks unless a test gives its own).
 * @returns The hold: `start` for the body's first byte, `cancel`.
 * @throws Nothing of its own; `writeHead`'s errors are the caller's (relay-response.ts catches them).
 */
export function holdHead(
  res: HeldResponse,
  writeHead: () => void,
  holdMs: number,
  timers: HoldTimers = DEADLINES,
): HeadHold {
  let ended = false;
  let timer: unknown;
  const cancel = () => {
    ended = true;
    if (timer === undefined) return;
    timers.clear(timer);
    timer = undefined;
  };
  timers.defer(() => {
    if (ended || res.headersSent || res.writableEnded || res.destroyed || isAnsweredByServer(res)) return;
    timer = timers.set(() => {
      timer = undefined;
      if (res.headersSent || res.writableEnded || res.destroyed) return;
      writeHead();
      if (res.headersSent && !res.destroyed) res.flushHeaders();
    }, holdMs);
    // A response that ends without its body starting (a 502, the client gone) ends the hold: its timer
    // would otherwise keep the exchange (response, upstream response, headers) until it ran.
    res.once('close', cancel);
    res.once(ANSWERED_BY_SERVER, cancel);
  });
  return {
    start: () => {
      cancel();
      if (!res.headersSent) writeHead();
    },
    cancel,
  };
}
