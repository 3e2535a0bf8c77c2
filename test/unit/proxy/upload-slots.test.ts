/**
 * The bound on request bodies streaming to the upstream at once (MAX_STREAMING_UPLOADS,
 * src/proxy/upload-slots.ts): all-or-nothing slots, given back once per request, on the body's end or
 * the request's or its connection's close. No sockets: the request and its connection are event-emitter
 * stand-ins.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createUploadSlots, holdUploadSlot } from '../../../src/proxy/upload-slots.ts';

/** A request whose body is still arriving (`complete` false unless told), on a connection of its own. */
function request(complete = false): IncomingMessage {
  return Object.assign(new EventEmitter(), {
    complete,
    socket: new EventEmitter(),
  }) as unknown as IncomingMessage;
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
    const req = request();
    expect(holdUploadSlot(slots, req)).toBeTypeOf('function');
    expect(slots.inUse).toBe(1);
    req.emit('end');
    expect(slots.inUse).toBe(0);
  });

  it.each<[string, (req: IncomingMessage) => EventEmitter]>([
    ['the request closes without its end (a client gone)', (req) => req],
    [
      "the connection closes and the request hears nothing (its response finished: Node's server)",
      (req) => req.socket,
    ],
  ])('gives the slot back when %s', (_when, closing) => {
    const slots = createUploadSlots(1);
    const req = request();
    holdUploadSlot(slots, req);
    closing(req).emit('close');
    expect(slots.inUse).toBe(0);
  });

  it('gives it back when the caller does (the upstream request closed), once, listeners removed', () => {
    const slots = createUploadSlots(2);
    holdUploadSlot(slots, request());
    const req = request();
    const giveBack = holdUploadSlot(slots, req);
    giveBack?.();
    giveBack?.();
    req.emit('end');
    expect(slots.inUse).toBe(1);
    expect(req.listenerCount('end')).toBe(0);
    expect(req.socket.listenerCount('close')).toBe(0);
  });

  it('gives it back once when both happen, and leaves no listener behind', () => {
    const slots = createUploadSlots(2);
    holdUploadSlot(slots, request());
    const req = request();
    holdUploadSlot(slots, req);
    req.emit('end');
    req.emit('close');
    // The other request's slot is still held: the second event gave nothing back.
    expect(slots.inUse).toBe(1);
    expect(req.listenerCount('end')).toBe(0);
    expect(req.listenerCount('close')).toBe(0);
    // A keep-alive connection carries further requests: nothing of this one stays on it.
    expect(req.socket.listenerCount('close')).toBe(0);
  });

  it('refuses when every slot is held, taking nothing and listening to nothing', () => {
    const slots = createUploadSlots(1);
    holdUploadSlot(slots, request());
    const req = request();
    expect(holdUploadSlot(slots, req)).toBeUndefined();
    expect(slots.inUse).toBe(1);
    expect(req.listenerCount('end')).toBe(0);
    expect(req.listenerCount('close')).toBe(0);
  });

  it('takes no slot for a client already gone (its close has passed: nothing would give it back)', () => {
    const slots = createUploadSlots(1);
    const req = request();
    Object.assign(req.socket, { destroyed: true });
    expect(holdUploadSlot(slots, req)).toBeTypeOf('function');
    expect(slots.inUse).toBe(0);
    expect(req.socket.listenerCount('close')).toBe(0);
  });

  it('needs no slot for a body that has already arrived whole', () => {
    const slots = createUploadSlots(1);
    slots.tryTake();
    const giveBack = holdUploadSlot(slots, request(true));
    expect(giveBack).toBeTypeOf('function');
    expect(slots.inUse).toBe(1);
    // Giving back what was not taken gives nothing: the slot taken above stays.
    giveBack?.();
    expect(slots.inUse).toBe(1);
  });
});
