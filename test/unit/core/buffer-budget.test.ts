/**
 * The process-wide buffer budget (MAX_BUFFERED_BYTES, issue 9 item 2): all-or-nothing reservations,
 * releases that never widen it.
 */
import { describe, expect, it } from 'vitest';
import {
  createBufferBudget,
  ownsMemory,
  Reservation,
  requestBodyCeiling,
  reusableOutputCeiling,
  tryReserveReusable,
} from '../../../src/core/buffer-budget.ts';

describe('createBufferBudget', () => {
  it('reserves up to the limit exactly, then refuses without reserving', () => {
    const budget = createBufferBudget(100);
    expect(budget.tryReserve(60)).toBe(true);
    expect(budget.tryReserve(40)).toBe(true);
    expect(budget.used).toBe(100);
    expect(budget.tryReserve(1)).toBe(false);
    expect(budget.used).toBe(100);
  });

  it('a refused reservation takes nothing, a smaller one still fits', () => {
    const budget = createBufferBudget(100);
    budget.tryReserve(50);
    expect(budget.tryReserve(51)).toBe(false);
    expect(budget.tryReserve(50)).toBe(true);
  });

  it('release gives room back and never goes below zero', () => {
    const budget = createBufferBudget(10);
    budget.tryReserve(10);
    budget.release(4);
    expect(budget.used).toBe(6);
    budget.release(100);
    expect(budget.used).toBe(0);
    expect(budget.tryReserve(11)).toBe(false);
  });

  it('refuses negative reservations', () => {
    expect(createBufferBudget(10).tryReserve(-1)).toBe(false);
  });

  it('grants an empty reservation even when full (it takes nothing)', () => {
    const budget = createBufferBudget(10);
    expect(budget.tryReserve(0)).toBe(true);
    budget.tryReserve(10);
    expect(budget.tryReserve(0)).toBe(true);
    expect(budget.used).toBe(10);
  });

  it.each([0, -1, 1.5, Number.NaN])('rejects the limit %s', (limit) => {
    expect(() => createBufferBudget(limit)).toThrow(new RangeError(`invalid budget limit ${limit}`));
  });
});

describe('Reservation', () => {
  it('grows, and releases everything exactly once', () => {
    const budget = createBufferBudget(100);
    const r = new Reservation(budget);
    expect(r.grow(30)).toBe(true);
    expect(r.grow(30)).toBe(true);
    expect(r.grow(50)).toBe(false);
    expect(r.bytes).toBe(60);
    expect(budget.used).toBe(60);
    budget.tryReserve(10); // someone else's
    r.release();
    r.release();
    expect(budget.used).toBe(10);
    expect(r.bytes).toBe(0);
  });

  it('transfers what it holds to a new owner: each release gives back its own share once (fix 111)', () => {
    const budget = createBufferBudget(100);
    const r = new Reservation(budget, 50);
    r.grow(40);
    const moved = r.transfer();
    expect([r.bytes, moved.bytes, budget.used]).toEqual([0, 40, 40]);
    r.release(); // the exchange's end, before the new owner is done
    expect(budget.used).toBe(40);
    expect(moved.grow(20)).toBe(false); // the same ceiling
    moved.release();
    moved.release();
    expect(budget.used).toBe(0);
  });

  it('with a ceiling, grows only while the budget’s total use stays within it; others may go beyond', () => {
    const budget = createBufferBudget(100);
    const body = new Reservation(budget, requestBodyCeiling(budget));
    expect(requestBodyCeiling(budget)).toBe(75);
    expect(body.fits(75)).toBe(true);
    expect(body.fits(76)).toBe(false);
    expect(body.grow(70)).toBe(true);
    expect(body.grow(10)).toBe(false); // 80 > 75
    expect(budget.used).toBe(70);
    // A patch's value (no ceiling) still has the last quarter.
    const value = new Reservation(budget);
    expect(value.grow(30)).toBe(true);
    expect(budget.used).toBe(100);
    // … and what the values hold counts against the bodies' ceiling too.
    body.release();
    expect(new Reservation(budget, 75).grow(50)).toBe(false); // 30 + 50 > 75
    expect(new Reservation(budget, 75).grow(45)).toBe(true);
  });

  it('buffers kept for reuse fill at most a quarter: the rest stays for bodies and held values (fix 89)', () => {
    const budget = createBufferBudget(100);
    expect(reusableOutputCeiling(budget)).toBe(25);
    expect(tryReserveReusable(budget, 20)).toBe(true);
    expect(tryReserveReusable(budget, 6)).toBe(false); // 26 > 25: nothing reserved
    expect(tryReserveReusable(budget, 5)).toBe(true);
    expect(budget.used).toBe(25);
    // What must be held still has the other three quarters…
    const value = new Reservation(budget);
    expect(value.grow(75)).toBe(true);
    // … and once the budget is used past the quarter by anything, nothing more is kept for reuse.
    value.release();
    budget.release(25);
    expect(new Reservation(budget).grow(30)).toBe(true);
    expect(tryReserveReusable(budget, 1)).toBe(false);
  });
});

describe('Reservation.shrink', () => {
  it('gives part of what is held back, never more than is held', () => {
    const budget = createBufferBudget(100);
    const reservation = new Reservation(budget);
    expect(reservation.grow(60)).toBe(true);
    reservation.shrink(25);
    expect([reservation.bytes, budget.used]).toEqual([35, 35]);
    reservation.shrink(1_000);
    expect([reservation.bytes, budget.used]).toEqual([0, 0]);
    reservation.release();
    expect(budget.used).toBe(0);
  });
});

describe('ownsMemory', () => {
  it('is true only for a buffer that spans its whole memory', () => {
    const whole = Buffer.alloc(8192);
    expect(ownsMemory(whole)).toBe(true);
    expect(ownsMemory(whole.subarray(1))).toBe(false);
    expect(ownsMemory(whole.subarray(0, 8191))).toBe(false);
    // Node's pool: a small allocation is a slice of a shared 8 KiB block.
    expect(ownsMemory(Buffer.from('ab'))).toBe(false);
    expect(ownsMemory(Buffer.alloc(0))).toBe(true);
  });
});
