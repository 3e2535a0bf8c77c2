/**
 * The decisions that keep the shim's own pauses (a stopped process, a blocked event loop) from being
 * blamed on a peer (docs/reliability.md fixes 99, 100): a deadline that fired late, and a write watchdog's
 * look after a gap. Pure: the clock is the test's numbers.
 */
import { describe, expect, it } from 'vitest';
import { OWN_PAUSE_MS, postponement } from '../../../src/proxy/own-pause.ts';
import { lookAtWrites, type WriteWatch } from '../../../src/proxy/write-watch.ts';

describe('postponement', () => {
  it('gives a deadline that fired an own pause late its lateness back', () => {
    // Due at 5 s, the shim stopped from 1 s to 11 s: the timer ran at 11 s.
    expect(postponement(5_000, 11_000)).toBe(6_000);
    expect(postponement(5_000, 5_000 + OWN_PAUSE_MS)).toBe(OWN_PAUSE_MS);
  });

  it('lets a deadline that fired on time, or late by a busy loop, expire', () => {
    expect(postponement(5_000, 5_000)).toBe(0);
    expect(postponement(5_000, 5_003)).toBe(0);
    expect(postponement(5_000, 5_000 + OWN_PAUSE_MS - 1)).toBe(0);
  });
});

describe('lookAtWrites', () => {
  const TIMEOUT = 5_000;
  const INTERVAL = 500;
  const stuckLook = (now: number) => ({ now, sent: 100, queued: true, established: true });

  it('cuts a write that has not moved for the timeout, looked at every interval', () => {
    const watch: WriteWatch = { last: 100, since: 0, lookedAt: 0 };
    for (let now = INTERVAL; now < TIMEOUT; now += INTERVAL) {
      expect(lookAtWrites(watch, stuckLook(now), TIMEOUT, INTERVAL)).toBe(false);
    }
    expect(lookAtWrites(watch, stuckLook(TIMEOUT), TIMEOUT, INTERVAL)).toBe(true);
  });

  it('does not count the time the shim was stopped: the first look after a 10 s stop is no cut', () => {
    // A client reading steadily; the shim stopped at 2 s for 10 s: libuv has not yet seen the kernel
    // take the bytes, so the first look sees no movement.
    const watch: WriteWatch = { last: 100, since: 2_000, lookedAt: 2_000 };
    expect(lookAtWrites(watch, stuckLook(12_000), TIMEOUT, INTERVAL)).toBe(false);
    // The next look, after a poll, sees the write moved.
    expect(lookAtWrites(watch, { ...stuckLook(12_500), sent: 900_000 }, TIMEOUT, INTERVAL)).toBe(false);
    expect(watch.since).toBe(12_500);
  });

  it('still cuts a write stuck across a stop, after the timeout of the time the shim ran', () => {
    const watch: WriteWatch = { last: 100, since: 0, lookedAt: 0 };
    let now = 0;
    for (; now < 3_000; now += INTERVAL) lookAtWrites(watch, stuckLook(now + INTERVAL), TIMEOUT, INTERVAL);
    // Stopped 20 s: one interval of it counts.
    now += 20_000;
    expect(lookAtWrites(watch, stuckLook(now), TIMEOUT, INTERVAL)).toBe(false);
    let cut = false;
    while (!cut) {
      now += INTERVAL;
      cut = lookAtWrites(watch, stuckLook(now), TIMEOUT, INTERVAL);
    }
    // 3 s before the stop + one interval of it + the rest after it: 5 s of the shim's own running time.
    expect(now).toBe(3_000 + 20_000 + 1_500);
  });

  it('starts over when the write moves, nothing is queued, or the socket is not connected yet', () => {
    const watch: WriteWatch = { last: 100, since: 0, lookedAt: 0 };
    expect(
      lookAtWrites(watch, { now: 6_000, sent: 100, queued: false, established: true }, TIMEOUT, INTERVAL),
    ).toBe(false);
    expect(watch.since).toBe(6_000);
    expect(
      lookAtWrites(watch, { now: 12_000, sent: 100, queued: true, established: false }, TIMEOUT, INTERVAL),
    ).toBe(false);
    expect(watch.since).toBe(12_000);
  });
});
