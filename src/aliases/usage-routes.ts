/**
 * The usage report on the admin listener (issue 11 item 1; never the front door): `GET /aliases/usage`
 * lists the {@link UsageTable}'s consumers, `DELETE /aliases/usage` starts a fresh table.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { JSON_CONTENT_TYPE } from '../core/errors.ts';
import { sendJson } from '../core/json-response.ts';
import type { AdminRoute } from '../core/types.ts';
import type { UsageRanking, UsageTable } from './usage-table.ts';

/** Consumers described and serialised per turn of the event loop (~3 ms of work each). */
const LISTING_SLICE = 500;

/**
 * Writes `{…, "consumers": [ … ]}` a slice of {@link LISTING_SLICE} consumers at a time, yielding to the
 * event loop between slices (`setImmediate`, also after a `drain`) and waiting for `drain` when the
 * client reads slowly. The admin listener shares the event loop with the front door: a table of
 * 100,000 consumers written as one document held every proxied exchange for ~600 ms (fix 97,
 * docs/reliability.md). Stops when the client goes away.
 * @param res The admin response, its head written.
 * @param prefix The document up to the consumers' array, opened.
 * @param listing The consumers, ranked ({@link UsageTable.ranking}).
 * @returns Resolves when the response has ended or its connection closed.
 */
function writeInSlices(res: ServerResponse, prefix: string, listing: UsageRanking): Promise<void> {
  return new Promise((resolve) => {
    let at = 0;
    let pending = prefix;
    const next = (): void => {
      if (res.destroyed) {
        resolve();
        return;
      }
      const to = Math.min(at + LISTING_SLICE, listing.length);
      pending += (at > 0 ? ',' : '') + JSON.stringify(listing.slice(at, to)).slice(1, -1);
      at = to;
      if (at >= listing.length) {
        res.end(`${pending}]}`, () => resolve());
        return;
      }
      const flowing = res.write(pending);
      pending = '';
      // Always through setImmediate: a socket that takes the bytes at once still emits `drain` from a
      // process.nextTick, so chaining on it alone wrote the whole listing without one turn of the loop.
      if (flowing) setImmediate(next);
      else res.once('drain', () => setImmediate(next));
    };
    res.once('close', () => resolve());
    next();
  });
}

/**
 * The `limit` of a usage listing: a whole number written in decimal digits (`0`, `10`; at most 9
 * digits), else `undefined` — absent, empty (`?limit=`), signed, fractional, hexadecimal, exponent or
 * padded forms, which `Number` would have read as 0 or as some other number.
 * @param raw The `limit` query parameter, decoded (`URLSearchParams.get`), or `null` when absent.
 * @returns The number of consumers to list, or `undefined` for the whole table.
 * @throws Nothing.
 */
function listingLimit(raw: string | null): number | undefined {
  return raw !== null && /^[0-9]{1,9}$/.test(raw) ? Number(raw) : undefined;
}

/** Path of the usage report on the admin listener (issue 11 item 1). */
export const USAGE_PATH = '/aliases/usage';

/**
 * The admin routes of the usage report.
 * - `GET /aliases/usage[?limit=n]` → 200 `{since, capacity, recorded, consumers}`, the consumers sorted
 *   by `count` ({@link UsageTable.ranking}); a `limit` that is not a whole number ≥ 0 in decimal digits
 *   ({@link listingLimit}; an empty one too) lists the whole table. A listing of more than
 *   {@link LISTING_SLICE} consumers is written a slice at a time (chunked, no `Content-Length`), so
 *   that a large table does not hold the event loop the front door shares; `HEAD` gets the head alone.
 * - `DELETE /aliases/usage` → 204: the table is reset and `since` moves to now; `onReset` is told what
 *   was dropped and who asked (for the log: the counts are gone for good).
 * @param usage The layer's usage table.
 * @param now The clock, ms since the epoch: `since` is when the table was created or last reset.
 * @param onReset Told of each reset: the requests and consumers the table held, its `since`, and the
 *   admin client's address.
 * @returns The two routes, for a plugin's `adminRoutes` (`ProxyPlugin`, core/types.ts; the core answers
 *   `HEAD` as `GET`, other methods with 405).
 * @throws Nothing (it calls `now` once). The handlers throw only a `RangeError` from
 *   `toISOString` when `now` returned no valid time (the core answers a thrown error with 500).
 * @example
 * const plugin = { name: 'aliases', adminRoutes: usageRoutes(usage, Date.now), onRequest };
 */
export function usageRoutes(
  usage: UsageTable,
  now: () => number,
  onReset?: (dropped: { recorded: number; consumers: number; since: string; remoteAddress?: string }) => void,
): AdminRoute[] {
  let since = now();
  return [
    {
      method: 'GET',
      path: USAGE_PATH,
      handle(req: IncomingMessage, res: ServerResponse) {
        const limit = listingLimit(new URL(req.url ?? '/', 'http://admin').searchParams.get('limit'));
        const listing = usage.ranking(limit ?? usage.capacity);
        const head = {
          since: new Date(since).toISOString(),
          capacity: usage.capacity,
          recorded: usage.recorded,
        };
        if (listing.length <= LISTING_SLICE) {
          sendJson(res, 200, { ...head, consumers: listing.slice(0, listing.length) });
          return;
        }
        res.writeHead(200, {
          'content-type': JSON_CONTENT_TYPE,
          'cache-control': 'no-store',
        });
        if (req.method === 'HEAD') {
          res.end();
          return;
        }
        return writeInSlices(res, `${JSON.stringify(head).slice(0, -1)},"consumers":[`, listing);
      },
    },
    {
      method: 'DELETE',
      path: USAGE_PATH,
      handle(req: IncomingMessage, res: ServerResponse) {
        const dropped = {
          recorded: usage.recorded,
          consumers: usage.size,
          since: new Date(since).toISOString(),
          remoteAddress: req.socket.remoteAddress,
        };
        usage.reset();
        since = now();
        onReset?.(dropped);
        res.writeHead(204, { 'cache-control': 'no-store' });
        res.end();
      },
    },
  ];
}
