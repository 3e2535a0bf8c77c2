/**
 * CPU time of this thread, for the system tier's algorithmic-complexity tests: the stack runs
 * in-process (test/helpers/stack.ts), so the thread's CPU time while requests are served is the
 * shim's work on them (plus the client's, which is small and the same for the cases compared). CPU
 * time, not wall time: a loaded or throttled runner does not inflate it.
 */

/**
 * Runs `work` and returns its result and the CPU time this thread used meanwhile, in ms.
 * @example
 * const { ms } = await threadCpuMs(() => send(stack.url, 'GET', '/user/me', CURRENT));
 */
export async function threadCpuMs<T>(work: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const before = process.threadCpuUsage();
  const result = await work();
  const used = process.threadCpuUsage(before);
  return { result, ms: (used.user + used.system) / 1000 };
}

/**
 * Runs `make(i)` for i = 0 … count − 1, one after the other, and returns the results and the CPU time
 * this thread used for all of them, in ms.
 */
export function cpuOfEach<T>(
  count: number,
  make: (i: number) => Promise<T>,
): Promise<{ result: T[]; ms: number }> {
  return threadCpuMs(async () => {
    const out: T[] = [];
    for (let i = 0; i < count; i++) out.push(await make(i));
    return out;
  });
}

/** Interval of the stall sampler of {@link withLoopDelay}, in ms. */
const TICK_MS = 10;

/**
 * Runs `work` and returns its result and the longest event-loop stall meanwhile, in ms: the longest
 * gap between two ticks of a {@link TICK_MS} timer beyond the interval, counted only as far as this
 * thread (the shim's: the stack runs in-process) used CPU during the gap (`process.threadCpuUsage`).
 * Time the OS did not run it (a loaded, throttled or paused CI runner) is then no stall, while a loop
 * kept busy for a second is one. (`monitorEventLoopDelay` reads wall time: a test process frozen 600 ms
 * read a 600 ms stall; docs/testing.md "Runs under load".)
 * @example const { result, maxStallMs } = await withLoopDelay(() => send(stack.url, 'GET', '/'));
 */
export async function withLoopDelay<T>(work: () => Promise<T>): Promise<{ result: T; maxStallMs: number }> {
  let maxStallMs = 0;
  let lastWall = performance.now();
  let lastCpu = process.threadCpuUsage();
  const sample = () => {
    const wall = performance.now();
    const cpu = process.threadCpuUsage(lastCpu);
    maxStallMs = Math.max(maxStallMs, Math.min(wall - lastWall - TICK_MS, (cpu.user + cpu.system) / 1000));
    lastWall = wall;
    lastCpu = process.threadCpuUsage();
  };
  const timer = setInterval(sample, TICK_MS);
  try {
    const result = await work();
    sample();
    return { result, maxStallMs };
  } finally {
    clearInterval(timer);
  }
}
