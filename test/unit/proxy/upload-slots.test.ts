/**
 * The bound on request bodies streaming to the upstream at once (MAX_STREAMING_UPLOADS,
 * src/proxy/upload-slots.ts): all-or-nothing slots, given back once per exchange, on the body's end or
 * the exchange's close. No sockets: the request and response are event-emitter stand-ins.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createUploadSlots, holdUploadSlot } from '../../../src/proxy/upload-slots.ts';

/** A request whose body is still arriving (`complete` false until told), and its response. */
function exchange(complete = false) {
  const req = Object.assign(new EventEmitter(), { complete }) as unknown as IncomingMessage;
  const res = new EventEmitter() as unknown as ServerResponse;
  return { req, res };
}

describe('createUploadSlots', () => {
  it('takes up to the limit, then refuses without taking', () => {
    const slots = createUploadSlots(2);
    expect(slots.tryTake()).toBe(true);
    expect(slots.tryTake()).toBe(true);
    expect(slots.tryTake()).toBe(false);
    expect(slots.inUse).toBe(2);
    expect(slots.limit).toBe(2);
  });

  it('a slot given back can be taken again; giving never goes below zero', () => {
    const slots = createUploadSlots(1);
    slots.tryTake();
    slots.give();
    slots.give();
    expect(slots.inUse).toBe(0);
    expect(slots.tryTake()).toBe(true);
    expect(slots.tryTake()).toBe(false);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses a limit of %s', (limit) => {
    expect(() => createUploadSlots(limit)).toThrow(RangeError);
  });
});

describe('holdUploadSlot', () => {
  it("holds a slot until the body's end", () => {
    const slots = createUploadSlots(1);
    const { req, res } = exchange();
    expect(holdUploadSlot(slots, req, res)).toBe(true);
    expect(slots.inUse).toBe(1);
    req.emit('end');
    expect(slots.inUse).toBe(0);
  });

  it('gives the slot back when the exchange closes first (a client gone, a refusal)', () => {
    const slots = createUploadSlots(1);
    const { req, res } = exchange();
    holdUploadSlot(slots, req, res);
    res.emit('close');
    expect(slots.inUse).toBe(0);
  });

  it('gives it back once when both happen, and leaves no listener behind', () => {
    const slots = createUploadSlots(2);
    const other = exchange();
    holdUploadSlot(slots, other.req, other.res);
    const { req, res } = exchange();
    holdUploadSlot(slots, req, res);
    req.emit('end');
    res.emit('close');
    // The other exchange's slot is still held: the second event gave nothing back.
    expect(slots.inUse).toBe(1);
    expect(req.listenerCount('end')).toBe(0);
    expect(res.listenerCount('close')).toBe(0);
  });

  it('refuses when every slot is held, taking nothing and listening to nothing', () => {
    const slots = createUploadSlots(1);
    const first = exchange();
    holdUploadSlot(slots, first.req, first.res);
    const { req, res } = exchange();
    expect(holdUploadSlot(slots, req, res)).toBe(false);
    expect(slots.inUse).toBe(1);
    expect(res.listenerCount('close')).toBe(0);
  });

  it('needs no slot for a body that has already arrived whole', () => {
    const slots = createUploadSlots(1);
    slots.tryTake();
    const { req, res } = exchange(true);
    expect(holdUploadSlot(slots, req, res)).toBe(true);
    expect(slots.inUse).toBe(1);
  });
});
