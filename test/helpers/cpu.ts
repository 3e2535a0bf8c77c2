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
