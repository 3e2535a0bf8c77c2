/**
 * The usage report on the admin listener (issue 11 item 1; never the front door): `GET /aliases/usage`
 * lists the {@link UsageTable}'s consumers, `DELETE /aliases/usage` starts a fresh table.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from '../proxy/respond.ts';
import type { AdminRoute } from '../proxy/types.ts';
import type { UsageTable } from './usage-table.ts';

/** Path of the usage report on the admin listener (issue 11 item 1). */
export const USAGE_PATH = '/aliases/usage';

/**
 * The admin routes of the usage report.
 * - `GET /aliases/usage[?limit=n]` → 200 `{since, capacity, recorded, consumers}`, the consumers sorted by
 *   `count` ({@link UsageTable.top}); a `limit` that is not a whole number ≥ 0 lists the whole table.
 * - `DELETE /aliases/usage` → 204: the table is reset and `since` moves to now.
 * @param usage The layer's usage table.
 * @param now The clock, ms since the epoch: `since` is when the table was created or last reset.
 * @returns The two routes, for {@link ProxyPlugin.adminRoutes} (the core answers `HEAD` as `GET`, other
 *   methods with 405).
 * @example
 * const plugin = { name: 'aliases', adminRoutes: usageRoutes(usage, Date.now), onRequest };
 */
export function usageRoutes(usage: UsageTable, now: () => number): AdminRoute[] {
  let since = now();
  return [
    {
      method: 'GET',
      path: USAGE_PATH,
      handle(req: IncomingMessage, res: ServerResponse) {
        const limit = Number(
          new URL(req.url ?? '/', 'http://admin').searchParams.get('limit') ?? usage.capacity,
        );
        sendJson(res, 200, {
          since: new Date(since).toISOString(),
          capacity: usage.capacity,
          recorded: usage.recorded,
          consumers: usage.top(Number.isInteger(limit) && limit >= 0 ? limit : usage.capacity),
        });
      },
    },
    {
      method: 'DELETE',
      path: USAGE_PATH,
      handle(_req: IncomingMessage, res: ServerResponse) {
        usage.reset();
        since = now();
        res.writeHead(204, { 'cache-control': 'no-store' });
        res.end();
      },
    },
  ];
}
