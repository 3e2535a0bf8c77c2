/**
 * The request body on its way upstream (src/proxy/upload.ts), with stand-ins for the request and the
 * upstream request: no socket.
 */
import { EventEmitter } from 'node:events';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createBufferBudget, Reservation } from '../../../src/core/buffer-budget.ts';
import { keepUploadGoing, releaseWhenSent, sendBodyStart } from '../../../src/proxy/upload.ts';
import { SharedReadBufferAgent } from '../../../src/proxy/upstream-agent.ts';
import type { Forwarding } from '../../../src/proxy/upstream-attempt.ts';
import { freedConnection } from '../../helpers/freed-connection.ts';

/** An upstream request stand-in: `write` answers `accepts` and keeps its callbacks to run by hand. */
class FakeUpstreamRequest extends EventEmitter {
  readonly written: Buffer[] = [];
  readonly callbacks: ((err?: Error | null) => void)[] = [];
  writableFinished = false;
  destroyed = false;
  readonly accepts: boolean;
  constructor(accepts: boolean) {
    super();
    this.accepts = accepts;
  }
  write(chunk: Buffer, callback: (err?: Error | null) => void): boolean {
    this.written.push(chunk);
    this.callbacks.push(callback);
    return this.accepts;
  }
}

/** An exchange whose body start is `start`, held in a reservation of a 1 KiB budget. */
function exchange(start: Buffer) {
  const budget = createBufferBudget(1024);
  const reservation = new Reservation(budget, 1024);
  reservation.grow(start.length);
  let resumed = 0;
  const req = {
    resume: () => {
      resumed++;
    },
  };
  const f = { req, bodyStart: start, reservation } as unknown as Forwarding;
  return { f, budget, resumed: () => resumed };
}

describe('sendBodyStart', () => {
  it('writes the start, resumes the request at once when the write was taken, releases once written', () => {
    const { f, budget, resumed } = exchange(Buffer.from('first bytes'));
    const upstreamReq = new FakeUpstreamRequest(true);
    sendBodyStart(f, upstreamReq as unknown as ClientRequest);
    expect(upstreamReq.written.map(String)).toEqual(['first bytes']);
    expect(f.bodyStart).toBeUndefined();
    expect(resumed()).toBe(1);
    // Held until the socket has it.
    expect(budget.used).toBe(11);
    upstreamReq.callbacks[0]?.();
    expect(budget.used).toBe(0);
  });

  it('resumes the request only at the drain when the start filled the upstream request', () => {
    const { f, resumed } = exchange(Buffer.from('first bytes'));
    const upstreamReq = new FakeUpstreamRequest(false);
    sendBodyStart(f, upstreamReq as unknown as ClientRequest);
    expect(resumed()).toBe(0);
    upstreamReq.emit('drain');
    expect(resumed()).toBe(1);
  });

  it('releases the reservation when the write fails too, and leaves the failed chunk alone', () => {
    const start = Buffer.allocUnsafeSlow(8).fill(0x61);
    const { f, budget } = exchange(start);
    const upstreamReq = new FakeUpstreamRequest(true);
    sendBodyStart(f, upstreamReq as unknown as ClientRequest);
    upstreamReq.callbacks[0]?.(new Error('socket hang up'));
    expect(budget.used).toBe(0);
    expect(start.length).toBe(8); // not detached: its memory was not known to be written
  });
});

describe('releaseWhenSent', () => {
  it('releases at once a body already written', () => {
    const budget = createBufferBudget(100);
    const reservation = new Reservation(budget, 100);
    reservation.grow(40);
    const upstreamReq = new FakeUpstreamRequest(true);
    upstreamReq.writableFinished = true;
    releaseWhenSent(reservation, upstreamReq as unknown as ClientRequest);
    expect(budget.used).toBe(0);
  });

  it.each(['finish', 'close'])('holds a body still queued until the upstream request’s %s', (event) => {
    const budget = createBufferBudget(100);
    const reservation = new Reservation(budget, 100);
    reservation.grow(40);
    const upstreamReq = new FakeUpstreamRequest(true);
    releaseWhenSent(reservation, upstreamReq as unknown as ClientRequest);
    // The exchange's own release (its response closed) no longer gives the bytes back …
    reservation.release();
    expect(budget.used).toBe(40);
    // … the upstream request's end does.
    upstreamReq.emit(event);
    expect(budget.used).toBe(0);
  });
});

describe('keepUploadGoing', () => {
  // hyper 0.14 answers an upload it will not read without `Connection: close`, then resets: the next
  // request given that connection got 502 (fix 169). Answered before its body was all sent, the
  // connection is retired: its pool closes it when freed.
  it('retires the connection when the answer comes before the body was all sent', () => {
    const finished = false;
    const socket = freedConnection();
    const upstreamReq = Object.assign(new EventEmitter(), {
      socket,
      writableFinished: finished,
      destroyed: false,
    }) as unknown as ClientRequest;
    const req = Object.assign(new EventEmitter(), { socket: new EventEmitter(), complete: false });
    keepUploadGoing(
      req as unknown as IncomingMessage,
      upstreamReq,
      new EventEmitter() as IncomingMessage,
      1000,
    );
    const agent = new SharedReadBufferAgent({ keepAlive: true });
    agent.emit('free', socket, { host: 'backend', port: 80 });
    expect(socket.destroyed).toBe(true);
    socket.destroy();
    agent.destroy();
  });
});
