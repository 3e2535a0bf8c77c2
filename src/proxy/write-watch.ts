/**
 * Write watchdogs (docs/reliability.md fixes 85, 86, 100): a socket holding a write that the kernel has
 * taken none of for `UPSTREAM_TIMEOUT_MS` is stuck — its peer vanished or stopped reading — and is cut.
 * {@link lookAtWrites} decides one look, pure; {@link watchStuckWrites} takes the looks.
 */
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { OWN_PAUSE_MS } from './own-pause.ts';
import { isEstablished, writeProgress } from './upstream-agent.ts';

/** How many looks per `UPSTREAM_TIMEOUT_MS` a write watchdog takes: a stuck write is cut within 11/10 of it. */
const WRITE_WATCH_LOOKS = 10;

/** What a write watchdog keeps between two looks ({@link lookAtWrites}); times are `performance.now()`, ms. */
export interface WriteWatch {
  /** The bytes taken at the last look that saw them move. */
  last: number;
  /** Since when the write has not moved, in the shim's own running time (see {@link lookAtWrites}). */
  since: number;
  /** When the previous look was. */
  lookedAt: number;
}

/** What one look of a write watchdog sees: the time, {@link writeProgress}, and whether the socket is connected. */
export interface WriteLook {
  readonly now: number;
  readonly sent: number;
  readonly queued: boolean;
  readonly established: boolean;
}

/**
 * One look of a write watchdog: whether the socket's queued write has not moved for `timeoutMs`. A look
 * that comes {@link OWN_PAUSE_MS} or more later than its interval (the shim was stopped or its event
 * loop blocked) counts one interval of that gap, not all of it: the shim could not see the write move
 * meanwhile (libuv learns that the kernel took the bytes only when it polls, after the timers), and a
 * peer that read while the shim was stopped is not stalled (docs/reliability.md fix 100). Pure: the
 * watchdog's timer and clock are the caller's.
 * @param watch The watchdog's state, updated.
 * @param look This look.
 * @param timeoutMs `UPSTREAM_TIMEOUT_MS`, in ms.
 * @param intervalMs The time between two looks, in ms.
 * @returns `true`: stuck, cut it.
 * @throws Nothing.
 */
export function lookAtWrites(
  watch: WriteWatch,
  look: WriteLook,
  timeoutMs: number,
  intervalMs: number,
): boolean {
  const gap = look.now - watch.lookedAt;
  watch.lookedAt = look.now;
  if (look.sent !== watch.last || !look.queued || !look.established) {
    watch.last = look.sent;
    watch.since = look.now;
    return false;
  }
  if (gap - intervalMs >= OWN_PAUSE_MS) watch.since += gap - intervalMs;
  return look.now - watch.since >= timeoutMs;
}

/**
 * Watches a socket's writes: when it holds a write that has not moved for `timeoutMs` (its kernel took
 * none of the bytes: the peer vanished without a FIN or RST — a dead node, a pulled cable, an expired
 * NAT or conntrack entry — or it stopped reading), `onStuck` runs, once, within 11/10 of `timeoutMs`.
 * Idle without a queued write, or while the socket connects, is not stuck; nor is the time the shim
 * itself was stopped ({@link lookAtWrites}). Used for the two writes no other timer bounds
 * (docs/reliability.md fixes 85, 86): a streamed upload to the upstream, which
 * Node's idle timer gave twice `UPSTREAM_TIMEOUT_MS` ({@link writeProgress}), and the tail of a
 * response the upstream has sent whole, whose upstream socket, and its timer, are gone. nginx bounds
 * both the same way: `proxy_send_timeout` and `send_timeout`, 60 s "between two successive write
 * operations".
 * @param socket The socket written to.
 * @param timeoutMs `UPSTREAM_TIMEOUT_MS`, in ms (a look every tenth of it, at least 1 ms apart).
 * @param active Whether the write still matters (checked at every look; false ends the watch).
 * @param onStuck What to do with a stuck write.
 * @returns Ends the watch.
 * @throws Nothing itself; `active` and `onStuck` run from the interval's callback, where a throw is an
 *   uncaught exception.
 */
export function watchStuckWrites(
  socket: Duplex,
  timeoutMs: number,
  active: () => boolean,
  onStuck: () => void,
): () => void {
  const intervalMs = Math.max(1, Math.ceil(timeoutMs / WRITE_WATCH_LOOKS));
  const now = performance.now();
  const watch: WriteWatch = { last: writeProgress(socket).sent, since: now, lookedAt: now };
  const timer = setInterval(() => {
    if (!active()) return stop();
    const look = { now: performance.now(), ...writeProgress(socket), established: isEstablished(socket) };
    if (!lookAtWrites(watch, look, timeoutMs, intervalMs)) return;
    stop();
    onStuck();
  }, intervalMs);
  // A bound, not a reason to keep the process alive (a drain's end cuts the sockets anyway).
  timer.unref();
  const stop = () => clearInterval(timer);
  return stop;
}
