/**
 * Load through a shim process: {@link CONNECTIONS} keep-alive client connections, one request on each
 * per {@link round}, for the concurrency tests (`test/e2e/reliability-concurrency.test.ts`,
 * `test/e2e/aliases-reliability-concurrency.test.ts`), and the scale of every load test.
 *
 * The scale: `npm test` runs the load tests at {@link LOAD_SCALE} 0.1 (100 connections, 100 aborts of
 * each kind…), enough to hold every property they check (all in flight at once, no error, nothing
 * left behind) in a few seconds; `npm run test:load` sets `LOAD_SCALE=1`, the full 1,000 the SPEC asks
 * for (docs/testing.md).
 *
 * What the helpers start is closed by {@link runCleanup}; call it from the test file's `afterAll`.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { type ShimProcess, spawnShim } from './spawn-shim.ts';

/**
 * Fraction of the full load the load tests run at: env `LOAD_SCALE`, a number in (0, 1]; default 0.1.
 * @throws Error at import when `LOAD_SCALE` is not such a number.
 */
export const LOAD_SCALE: number = (() => {
  const scale = Number(process.env.LOAD_SCALE ?? 0.1);
  if (!(scale > 0 && scale <= 1))
    throw new Error(`LOAD_SCALE must be in (0, 1], got ${process.env.LOAD_SCALE}`);
  return scale;
})();

/**
 * `full` scaled by {@link LOAD_SCALE}, rounded, at least `min`.
 * @example scaled(1_000) // 100 in `npm test`, 1,000 in `npm run test:load`
 */
export function scaled(full: number, min = 1): number {
  return Math.max(min, Math.round(full * LOAD_SCALE));
}

/** Client connections, all open at once: 1,000 at full scale. */
export const CONNECTIONS: number = scaled(1_000, 10);
/** Rounds of one request per connection, on the same connections. */
export const ROUNDS = 3;

/** Closers of what the helpers (and the test file) started, run last first by {@link runCleanup}. */
export const cleanup: Array<() => Promise<unknown>> = [];

/** Runs and forgets every closer in {@link cleanup}, last registered first. */
export async function runCleanup(): Promise<void> {
  for (const c of cleanup.splice(0).reverse()) await c();
}

/** One exchange of a {@link round}. */
export interface Outcome {
  /** The response's status; -1 when the request or the response failed. */
  status: number;
  /** The response body as UTF-8 (the error's text when the request failed). */
  body: string;
  /** Whether the request went out on a connection the agent had used before. */
  reused: boolean;
}

/**
 * Sends all `paths` at once, `GET` each on its own connection of `agent` (a {@link keepAliveAgent}
 * with exactly {@link CONNECTIONS} sockets), and resolves with every outcome, in the order of `paths`.
 * Never rejects: a failed exchange is an outcome with status -1.
 * @param base Origin, e.g. `http://127.0.0.1:8080`.
 * @param headers Sent with every request.
 */
export function round(
  agent: http.Agent,
  base: string,
  paths: string[],
  headers: Record<string, string>,
): Promise<Outcome[]> {
  return Promise.all(
    paths.map(
      (path) =>
        new Promise<Outcome>((resolve) => {
          const req = http.get(`${base}${path}`, { agent, headers }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              body += d;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body, reused: req.reusedSocket }));
            res.on('error', () => resolve({ status: -1, body, reused: req.reusedSocket }));
          });
          req.on('error', (err) => resolve({ status: -1, body: String(err), reused: false }));
        }),
    ),
  );
}

/**
 * A keep-alive agent of up to {@link CONNECTIONS} sockets, all kept when idle, destroyed by
 * {@link runCleanup}.
 * @returns The agent and every socket it created, so a test can count its connections.
 */
export function keepAliveAgent(): { agent: http.Agent; sockets: Set<Socket> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS, maxFreeSockets: CONNECTIONS });
  const sockets = new Set<Socket>();
  const createConnection = agent.createConnection.bind(agent);
  agent.createConnection = ((...args: Parameters<typeof createConnection>) => {
    const socket = createConnection(...args) as Socket;
    sockets.add(socket);
    return socket;
  }) as typeof agent.createConnection;
  cleanup.push(async () => agent.destroy());
  return { agent, sockets };
}

/**
 * Spawns a shim process at `LOG_LEVEL=info` (unless `env` says otherwise), stopped by
 * {@link runCleanup}.
 * @param env e.g. `{ UPSTREAM_URL: … }`; without `UPSTREAM_URL` the shim embeds the reference backend.
 */
export async function startShim(env: Record<string, string>): Promise<ShimProcess> {
  const shim = await spawnShim({ LOG_LEVEL: 'info', ...env });
  cleanup.push(() => shim.stop());
  return shim;
}
