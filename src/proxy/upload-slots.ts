/**
 * The bound on request bodies streaming to the upstream at once (`MAX_STREAMING_UPLOADS`): a bulkhead
 * inside the upstream pool. A streamed body (a chunked one, or the rest of one larger than
 * `REQUEST_BUFFER_BYTES`) holds its upstream connection for as long as the client takes to send it, so
 * clients that trickle such bodies — a chunked R.U.D.Y., or 64 KiB sent at once and the rest a byte at a
 * time — could hold every connection of the pool (`UPSTREAM_MAX_CONNECTIONS`), and every other request
 * then waited for one and got 504 after `UPSTREAM_TIMEOUT_MS` (docs/reliability.md fix 122; since fix 142
 * a 503 `pool_full` after `UPSTREAM_CONNECT_TIMEOUT_MS`). With the
 * bound, they hold at most `limit` connections; the rest of the pool stays for requests whose bodies
 * have arrived (or that have none), and a streamed body beyond the bound gets 503 with `Retry-After`,
 * as Envoy's circuit breakers answer a cluster's overflow. The bodies still stream (SPEC §4).
 */
import type { IncomingMessage } from 'node:http';
import { createBufferBudget } from '../core/buffer-budget.ts';

/** Counts the streamed request bodies in flight against their bound. */
export interface UploadSlots {
  /** Takes a slot; `false`, taking nothing, when all `limit` are in use. */
  tryTake(): boolean;
  /** Gives a slot back (never below 0: a double give is the caller's bug, and must not widen the bound). */
  give(): void;
  /** Slots in use now. */
  readonly inUse: number;
  /** The most slots in use at once (`MAX_STREAMING_UPLOADS`). */
  readonly limit: number;
}

/**
 * Creates the slots of `limit` streamed request bodies: a count of one per body on the budget's
 * all-or-nothing counter (buffer-budget.ts `createBufferBudget`), which never goes below 0.
 * @param limit Positive whole number (`MAX_STREAMING_UPLOADS`; at most the pool's size to mean anything).
 * @returns An {@link UploadSlots} with none in use.
 * @throws {RangeError} when `limit` is not a positive safe integer (`createBufferBudget`'s).
 * @example
 * const slots = createUploadSlots(512);
 * if (!slots.tryTake()) throw new ShimError('streaming_uploads', '…');
 */
export function createUploadSlots(limit: number): UploadSlots {
  const count = createBufferBudget(limit);
  return {
    tryTake: () => count.tryReserve(1),
    give: () => count.release(1),
    get inUse() {
      return count.used;
    },
    limit,
  };
}

/** Gives an upload slot back (idempotent: only the first call of a hold gives anything). */
export type GiveBack = () => void;

/** What holds nothing: a body that has already arrived whole needs no slot. */
const NOTHING_HELD: GiveBack = () => {};

/**
 * Takes a slot for an exchange whose request body streams to the upstream, and gives it back once the
 * client has sent the whole body (`req`'s `end`: from then on the upstream connection waits on the
 * upstream, not on the client) or the request is over without it (`req`'s `close`, or its
 * connection's: the client gone), or when the caller calls the returned function — the forwarder does
 * when the upstream request closes (upstream-attempt.ts): its connection is then held no more (an
 * upstream that answered early and closed), while the rest of the body may still be read and dropped
 * (upload.ts `boundDiscard`). Not when the response finishes: an upstream may answer early (a 404 or
 * 401 before it reads the body) and go on reading, and the upload goes on with it on the same upstream
 * connection (upload.ts `keepUploadGoing`), as long as the client trickles it — released with the
 * response, a slot let such clients hold any number of upstream connections
 * (test/security/slow-body-upstream-pool.test.ts › chunked R.U.D.Y.).
 * @param slots The process's slots.
 * @param req The client's request, its body not yet (or not wholly) read.
 * @returns `undefined` when no slot is free (the caller refuses the request: 503); otherwise the
 *   function that gives the slot back early (a no-op for a body that has already arrived whole, or a
 *   client already gone, which need none).
 * @throws Nothing.
 * @example
 * const giveBack = holdUploadSlot(slots, req);
 * if (giveBack === undefined) throw new ShimError('streaming_uploads', '…');
 * upstreamReq.once('close', giveBack);
 */
export function holdUploadSlot(slots: UploadSlots, req: IncomingMessage): GiveBack | undefined {
  const { socket } = req;
  // A client already gone (while the gates ran or the body's start was read) will not be forwarded
  // (upstream-attempt.ts), and the events that would give a slot back have passed.
  if (req.complete || req.destroyed || socket.destroyed) return NOTHING_HELD;
  if (!slots.tryTake()) return undefined;
  let held = true;
  const give = () => {
    if (!held) return;
    held = false;
    slots.give();
    req.off('end', give);
    req.off('close', give);
    socket.off('close', give);
  };
  req.once('end', give);
  req.once('close', give);
  // Once its response has finished, Node's server tells the request nothing of its connection closing
  // (upload.ts keepUploadGoing listens to the socket for the same reason).
  socket.once('close', give);
  return give;
}
