/**
 * src/proxy/head-hold.ts: the head waits for its body at most the hold, then goes alone; written once
 * whichever comes first; no timer at all for a body that starts before the code running now is done.
 * Pure: a hand-driven clock, a fake response.
 */
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { markAnsweredByServer } from '../../../src/core/exchange.ts';
import { type HeldResponse, type HoldTimers, holdHead } from '../../../src/proxy/head-hold.ts';

/**
 * A clock the test drives by hand: `endOfCode()` runs what was deferred (as the microtask after the
 * code running now would), `fire()` the pending timer's callback.
 */
function manualTimers() {
  let pending: (() => void) | undefined;
  let deferred: Array<() => void> = [];
  let delay: number | undefined;
  let set = 0;
  let cleared = 0;
  const timers: HoldTimers = {
    set(callback, ms) {
      pending = callback;
      delay = ms;
      set++;
      return 'handle';
    },
    clear(handle) {
      expect(handle).toBe('handle');
      pending = undefined;
      cleared++;
    },
    defer(callback) {
      deferred.push(callback);
    },
  };
  return {
    timers,
    delay: () => delay,
    set: () => set,
    cleared: () => cleared,
    armed: () => pending !== undefined,
    endOfCode() {
      const callbacks = deferred;
      deferred = [];
      for (const callback of callbacks) callback();
    },
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
    statusCode: 200,
    onClose: [] as Array<() => void>,
    flushHeaders() {
      this.flushed++;
    },
    once(_event: string, listener: () => void) {
      this.onClose.push(listener);
    },
    emit() {
      return true;
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

/** A hold of 250 ms on a fake response, on a hand-driven clock: everything a test looks at. */
function held() {
  const clock = manualTimers();
  const { res, writeHead } = fakeResponse();
  const hold = holdHead(res, writeHead, 250, clock.timers);
  return { clock, res, hold };
}

describe('holdHead', () => {
  it('arms the hold for the given ms once the code running now is done', () => {
    const { clock, res } = held();
    expect(clock.armed()).toBe(false);
    clock.endOfCode();
    expect(clock.delay()).toBe(250);
    expect(clock.armed()).toBe(true);
    expect(res.written).toBe(0);
  });

  it.each([
    ['before the hold is armed: no timer nor listener is ever set', false],
    ['after the hold was armed: start ends it', true],
  ])('the body first, %s; the head is written once, nothing is flushed', (_when, armedFirst) => {
    const { clock, res, hold } = held();
    if (armedFirst) clock.endOfCode();
    hold.start();
    clock.endOfCode();
    hold.start();
    expect(res.written).toBe(1);
    expect(clock.set()).toBe(armedFirst ? 1 : 0);
    expect(clock.cleared()).toBe(armedFirst ? 1 : 0);
    expect(res.onClose).toHaveLength(armedFirst ? 2 : 0);
    expect(clock.armed()).toBe(false);
    expect(res.flushed).toBe(0);
  });

  it('the hold first: the head is written and sent alone; start later writes nothing more', () => {
    const { clock, res, hold } = held();
    clock.endOfCode();
    clock.fire();
    expect(res.written).toBe(1);
    expect(res.flushed).toBe(1);
    hold.start();
    expect(res.written).toBe(1);
    expect(clock.cleared()).toBe(0);
  });

  /** Responses the hold must leave alone: answered otherwise, ended, or gone. */
  const settled = [
    ['answered (a 502)', { headersSent: true }],
    ['ended', { writableEnded: true }],
    ['destroyed (the client went away)', { destroyed: true }],
  ] as const;
  it.each(
    settled.flatMap(([what, state]) => [
      [what, 'after', state],
      [what, 'before', state],
    ]),
  )('a response %s %s the hold is armed: nothing written, nothing flushed', (_what, when, state) => {
    const { clock, res } = held();
    if (when === 'after') clock.endOfCode();
    Object.assign(res, state);
    clock.endOfCode();
    clock.fire();
    expect(clock.set()).toBe(when === 'after' ? 1 : 0);
    expect(res.written).toBe(0);
    expect(res.flushed).toBe(0);
  });

  it('a request the HTTP server answered itself before the hold is armed sets no timer', () => {
    const { clock, res } = held();
    markAnsweredByServer(res as unknown as ServerResponse, 400);
    clock.endOfCode();
    expect(clock.set()).toBe(0);
    expect(res.written).toBe(0);
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
    clock.endOfCode();
    clock.fire();
    expect(res.flushed).toBe(0);
  });

  it('the response closing first (a 502, the client gone) ends the hold: nothing keeps the exchange', () => {
    const { clock, res } = held();
    clock.endOfCode();
    res.close();
    expect(clock.armed()).toBe(false);
    expect(clock.cleared()).toBe(1);
    expect(res.written).toBe(0);
  });

  it('cancel ends the hold without writing; start then still writes the head', () => {
    const { clock, res, hold } = held();
    clock.endOfCode();
    hold.cancel();
    expect(clock.armed()).toBe(false);
    expect(res.written).toBe(0);
    hold.cancel();
    expect(clock.cleared()).toBe(1);
    hold.start();
    expect(res.written).toBe(1);
  });

  it('cancel before the hold is armed: no timer is set', () => {
    const { clock, res, hold } = held();
    hold.cancel();
    clock.endOfCode();
    expect(clock.set()).toBe(0);
    expect(res.written).toBe(0);
  });
});
