/**
 * An upstream that answered an upload early and stopped reading it (docs/reliability.md fixes 105,
 * 106): the streamed and the rewritten bodies' tests.
 */
import { expect } from 'vitest';
import { waitFor } from './poll.ts';
import type { Stack } from './stack.ts';

/**
 * Waits until the stack's upstream pool has no connection in use — the upstream connection given up —
 * and checks that this came `timeoutMs` or more after the answer, counted as an upstream timeout
 * (`shim_upstream_errors_total{kind="timeout"} 1`) and logged (a `warn` line of its own: the
 * exchange's line was written with its response). Without the fixes the connection was held with no
 * timer: the wait fails after four timeouts.
 * @param stack The stack under test.
 * @param answeredAt When the upstream wrote its early answer (`performance.now()`, ms, taken in the
 *   upstream's handler before its write): the shim cannot have had the answer sooner. Not when the
 *   client saw it: on a loaded machine the test's poll sees the answer late (284 ms), and the bound
 *   failed although the shim had waited its whole timeout (2 of 11 shuffled runs beside a busy loop).
 * @param timeoutMs The stack's `UPSTREAM_TIMEOUT_MS`.
 */
export async function expectUpstreamGivenUp(
  stack: Stack,
  answeredAt: number,
  timeoutMs: number,
): Promise<void> {
  const agent = stack.shim.forwarder.agent;
  await waitFor(() => Object.keys(agent.sockets).length === 0, {
    timeoutMs: timeoutMs * 4,
    what: 'the upstream connection given up',
  });
  expect(performance.now() - answeredAt).toBeGreaterThanOrEqual(timeoutMs - 50);
  expect(await stack.metrics.registry.metrics()).toMatch(/shim_upstream_errors_total\{kind="timeout"\} 1/);
  // The count has its line: the exchange's own was written with the response, before the failure.
  expect(
    stack
      .logs()
      .filter((l) => l.msg === 'upstream request failed after its response was sent')
      .map((l) => [l.upstreamError, l.kind, (l.res as { statusCode: number }).statusCode]),
  ).toEqual([['ESHIMTIMEDOUT', 'timeout', 404]]);
}
