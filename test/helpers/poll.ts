/**
 * Waiting for a condition instead of sleeping (docs/testing.md): a system test that must see
 * something happen (a socket closed, a log line written, a sentinel request arrived) polls for it with
 * a deadline, so that it is as fast as the machine allows and fails, with a message, when the
 * condition never holds — never a fixed sleep followed by an assertion.
 */

/** Options of {@link waitFor}. */
export interface WaitOptions {
  /** Give up after this long, in ms (default 5,000). */
  timeoutMs?: number;
  /** Time between two checks, in ms (default 10). */
  intervalMs?: number;
  /** Said in the error thrown when the deadline passes. */
  what?: string;
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Resolves with the first truthy value `check` returns (it may be async), checking every
 * `intervalMs`.
 * @throws Error naming `what` when `timeoutMs` passes first (a `check` that throws fails at once).
 * @example await waitFor(() => upstream.requests.length === 1, { what: 'the sentinel request' });
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 5_000, intervalMs = 10, what = 'the condition' }: WaitOptions = {},
): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await pause(intervalMs);
  }
}

/**
 * Resolves once `sample` returns the same value `times` checks in a row (`intervalMs` apart), with
 * that value: for counts that settle asynchronously, like a process's open descriptors after many
 * sockets closed on both sides.
 * @throws Error when the value is still changing after `timeoutMs`.
 */
export async function waitForStable<T>(
  sample: () => T | Promise<T>,
  {
    timeoutMs = 10_000,
    intervalMs = 50,
    times = 3,
    what = 'a stable value',
  }: WaitOptions & { times?: number } = {},
): Promise<T> {
  let last = await sample();
  let same = 1;
  await waitFor(
    async () => {
      const now = await sample();
      same = Object.is(now, last) ? same + 1 : 1;
      last = now;
      return same >= times;
    },
    { timeoutMs, intervalMs, what },
  );
  return last;
}
