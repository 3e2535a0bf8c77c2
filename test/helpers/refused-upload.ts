/**
 * A client that keeps uploading after the shim refused its request (RFC 9112 §9.6, the staged close):
 * the refused-upload tests of the core and of the alias layer.
 */
import net from 'node:net';
import { expect } from 'vitest';
import { waitFor } from './poll.ts';
import type { Stack } from './stack.ts';

/** The stack's `shim_rejections_total` count of one reason. */
export async function rejected(stack: Stack, reason: string): Promise<number> {
  const m = new RegExp(`shim_rejections_total\\{reason="${reason}"\\} (\\d+)`).exec(
    await stack.metrics.registry.metrics(),
  );
  return Number(m?.[1] ?? 0);
}

/**
 * Sends `head` on a fresh connection whose client reads nothing yet, waits until the shim has counted
 * one more rejection of `reason`, then sends `more` 16 times, each write awaited: every one must
 * complete (a shim that stopped reading, or reset the connection, fails the test here). Then reads.
 * @param stack The stack under test.
 * @param head The request head (and as much of its body as the refusal needs), latin1.
 * @param more What the client goes on sending, latin1.
 * @param reason The `shim_rejections_total` reason of the refusal, e.g. `credentials`.
 * @returns What the client read after it stopped sending (latin1), the refusal first.
 */
export async function sendOnThenRead(
  stack: Stack,
  head: string,
  more: string,
  reason: string,
): Promise<string> {
  const before = await rejected(stack, reason);
  const client = net.connect(Number(new URL(stack.url).port), '127.0.0.1');
  client.pause();
  let text = '';
  let failed: Error | undefined;
  client.on('error', (err) => {
    failed = err;
  });
  client.on('data', (d: Buffer) => {
    text += d.toString('latin1');
  });
  await new Promise((resolve) => client.once('connect', resolve));
  client.write(head, 'latin1');
  await waitFor(async () => (await rejected(stack, reason)) > before, { what: `the ${reason} rejection` });
  for (let i = 0; i < 16 && failed === undefined; i++) {
    await new Promise<void>((resolve) => client.write(more, 'latin1', () => resolve()));
  }
  expect(failed).toBeUndefined();
  client.resume();
  await waitFor(() => text.includes('\r\n\r\n{'), { what: 'the response' });
  client.destroy();
  return text;
}
