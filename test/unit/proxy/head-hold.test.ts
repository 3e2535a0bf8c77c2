/**
 * src/proxy/head-hold.ts: the head waits for its body at most the hold, then goes alone; written once
 * whichever comes first. Pure: a hand-driven clock, a fake response.
 */
import { describe, expect, it } from 'vitest';
import { type HeldResponse, type HoldTimers, holdHead } from '../../../src/proxy/head-hold.ts';

/** A clock the test fires by hand: `fire()` runs the pending callback, as its timer would. */
function manualTimers() {
  let pending: (() => void) | undefined;
  let delay: number | undefined;
  let cleared = 0;
  const timers: HoldTimers = {
    set(callback, ms) {
      pending = callback;
      delay = ms;
      return 'handle';
    },
    clear(handle) {
      expect(handle).toBe('handle');
      pending = undefined;
      cleared++;
    },
  };
  return {
    timers,
    delay: () => delay,
    cleared: () => cleared,
    armed: () => pending !== undefined,
    fire() {
      const callback = pending;
      pending = undefined;
      callback?.();
    },
  };
}

/** A response that records its head: `writeHead` marks it written, `flushHeaders` sent. */
function fakeResponse(state: Partial<HeldResponse> = {}) {
  const res = {
    headersSent: false,
    destroyed: false,
    writableEnded: false,
    flushed: 0,
    written: 0,
    onClose: [] as Array<() => void>,
    flushHeaders() {
      this.flushed++;
    },
    once(_event: 'close', listener: () => void) {
      this.onClose.push(listener);
    },
    close() {
      for (const listener of this.onClose.splice(0)) listener();
    },
    ...state,
  };
  const writeHead = () => {
    res.written++;
    res.headersSent = true;
  };
  return { res, writeHead };
}

describe('holdHead', () => {
  it('arms the hold for the given ms', () => {
    const clock = manualTimers();
    const { res, writeHead } = fakeResponse();
    holdHead(res, writeHead, 250, clock.timers);
    expect(clock.delay()).toBe(250);
    expect(clock.armed()).toBe(true);
    expect(res.written).toBe(0);
  });

  it('the body first: start writes the head once and ends the hold; nothing is flushed', () => {
    const clock = manualTimers();
    const { res, writeHead } = fakeResponse();
    const hold = holdHead(res, writeHead, 250, clock.timers);
    hold.start();
    hold.start();
    expect(res.written).toBe(1);
    expect(clock.cleared()).toBe(1);
    expect(clock.armed()).toBe(false);
    expect(res.flushed).toBe(0);
  });

  it('the hold first: the head is written and sent alone; start later writes nothing more', () => {
    const clock = manualTimers();
    const { res, writeHead } = fakeResponse();
    const hold = holdHead(res, writeHead, 250, clock.timers);
    clock.fire();
    expect(res.written).toBe(1);
    expect(res.flushed).toBe(1);
    hold.start();
    expect(res.written).toBe(1);
    expect(clock.cleared()).toBe(0);
  });

  it.each([
    ['answered meanwhile (a 502)', { headersSent: true }],
    ['ended meanwhile', { writableEnded: true }],
    ['destroyed meanwhile (the client went away)', { destroyed: true }],
  ])('the hold ends on a response %s: nothing written, nothing flushed', (_what, state) => {
    const clock = manualTimers();
    const { res, writeHead } = fakeResponse(state);
    holdHead(res, writeHead, 250, clock.timers);
    clock.fire();
    expect(res.written).toBe(0);
    expect(res.flushed).toBe(0);
  });

  it('a head that writeHead refused (the response destroyed by it) is not flushed', () => {
    const clock = manualTimers();
    const { res } = fakeResponse();
    holdHead(
      res,
      () => {
        res.destroyed = true;
      },
      250,
      clock.timers,
    );
    clock.fire();
    expect(res.flushed).toBe(0);
  });

  it('the response closing first (a 502, the client gone) ends the hold: nothing keeps the exchange', () => {
    const clock = manualTimers();
    const { res, writeHead } = fakeResponse();
    holdHead(res, writeHead, 250, clock.timers);
    res.close();
    expect(clock.armed()).toBe(false);
    expect(clock.cleared()).toBe(1);
    expect(res.written).toBe(0);
  });

  it('cancel ends the hold without writing; start then still writes the head', () => {
    const clock = manualTimers();
    const { res, writeHead } = fakeResponse();
    const hold = holdHead(res, writeHead, 250, clock.timers);
    hold.cancel();
    expect(clock.armed()).toBe(false);
    expect(res.written).toBe(0);
    hold.cancel();
    expect(clock.cleared()).toBe(1);
    hold.start();
    expect(res.written).toBe(1);
  });
});
