/**
 * Timers that do not blame a peer for the shim's own pauses. A process stopped (SIGSTOP, a cgroup
 * freeze, a VM live migration, a node swapping) or an event loop blocked (a long GC, a synchronous
 * stall) for longer than a timeout resumes with the timer expired and the peer's bytes waiting in the
 * kernel: a response head, a completed connect, an upload, a client's reads. libuv then runs the
 * expired timers before it reads the sockets (after SIGCONT, `epoll_wait` fails with EINTR, signal(7),
 * and `uv__io_poll` returns to the timers without polling), so a deadline measured with the monotonic
 * clock fired for an exchange whose peer had made progress: 504, 502, 408 or a cut connection
 * (docs/reliability.md fixes 99–101; nginx 1.22 does the same: `epoll_wait() failed (4: Interrupted
 * system call)`, then its timers).
 */
import { performance } from 'node:perf_hooks';

/**
 * A timer that fires at least this much later than it was due (ms) means the shim was not running for
 * that long: stopped, or its event loop blocked. Above the lag a CPU-starved process shows (a cgroup
 * quota throttles for at most its period, 100 ms by default).
 */
export const OWN_PAUSE_MS = 1_000;

/**
 * What a deadline that fired late does once the sockets have been read: give the peer back the time
 * the shim was not running after the deadline, when that was an own pause ({@link OWN_PAUSE_MS}), or
 * expire. The peer's progress during the pause is read first ({@link startDeadline}); time lost before
 * the deadline is not known, and the time lost after it bounds what the peer could not send (a client
 * whose upload filled the shim's receive window waits for the shim).
 * @param dueAt When the deadline was due (`performance.now()` scale, ms).
 * @param firedAt When its timer ran (same scale, ms).
 * @returns The ms to wait more (the lateness), or 0: expired. `postponement(5000, 11000)` is 6000
 *   (stopped for 10 s from 1 s on), `postponement(5000, 5003)` is 0.
 * @throws Nothing.
 */
export function postponement(dueAt: number, firedAt: number): number {
  const late = firedAt - dueAt;
  return late >= OWN_PAUSE_MS ? late : 0;
}

/** A running deadline ({@link startDeadline}). */
export interface Deadline {
  /** Cancels it: `onDue` will not run. */
  clear(): void;
}

/**
 * A `setTimeout` for a deadline on a peer (the upstream's head, a connect, a request body): when it
 * fires, the I/O already in the kernel is read first (one turn of the event loop, `setImmediate`:
 * libuv polls before its check phase), so that a peer whose bytes arrived while the shim was stopped
 * or blocked clears the deadline before it acts; then a deadline that fired {@link OWN_PAUSE_MS} late
 * or more waits its lateness once more ({@link postponement}), and one on time runs `onDue`. Once: the
 * postponed deadline runs `onDue` when it fires, however late: a deadline of `ms` acts by `ms` plus
 * twice its first lateness plus its second (docs/reliability.md fix 102).
 * @param onDue What to do when the deadline passed with no progress (answer 504, destroy, abort).
 * @param ms The deadline, from now, in ms.
 * @returns The deadline, to clear when the peer made it.
 * @throws Nothing; `onDue` runs from a `setImmediate` callback, so what it throws is an uncaught
 *   exception.
 */
export function startDeadline(onDue: () => void, ms: number): Deadline {
  let timer: NodeJS.Timeout | undefined;
  let immediate: NodeJS.Immediate | undefined;
  // `postponed`: the lateness was given back already. Once only: a shim stopped or blocked again and
  // again (3 s stalls 20 ms apart) otherwise gave it back at every firing, and the deadline never acted.
  const arm = (delay: number, postponed: boolean) => {
    const dueAt = performance.now() + delay;
    timer = setTimeout(() => {
      const more = postponed ? 0 : postponement(dueAt, performance.now());
      immediate = setImmediate(() => {
        immediate = undefined;
        if (more > 0) arm(more, true);
        else onDue();
      });
    }, delay);
  };
  arm(ms, false);
  return {
    clear() {
      clearTimeout(timer);
      if (immediate !== undefined) clearImmediate(immediate);
      immediate = undefined;
    },
  };
}

/**
 * Runs `decide` once the I/O the kernel holds has been read (the next turn of the event loop), with
 * whether the sampled sockets moved meanwhile: for the timers the shim does not schedule itself
 * (Node's socket idle timer, `socket.setTimeout`), which may have fired for a socket whose peer made
 * progress while the shim was stopped or blocked.
 * @param progress A sample of the sockets' progress (bytes read and sent), compared before and after.
 * @param decide Called with `true` when the sample changed: the peer was not idle.
 * @throws What `progress` throws on its first sample; nothing of its own. The second sample and
 *   `decide` run from a `setImmediate` callback, where a throw is an uncaught exception.
 */
export function afterPendingIo(progress: () => number, decide: (moved: boolean) => void): void {
  const before = progress();
  setImmediate(() => decide(progress() !== before));
}
