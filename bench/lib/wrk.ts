/**
 * Runs wrk (https://github.com/wg/wrk, Debian package `wrk`) and parses its report.
 *
 * Why wrk and not autocannon: wrk is a C load generator with a fixed, small cost per request, so on a
 * 2-core machine it leaves most of its core to the upstream it shares that core with; a Node load
 * generator (autocannon) spends more CPU per request than the reference backend itself and would cap
 * the direct baseline, shrinking every ratio towards 1.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What one wrk run measured. */
export interface WrkResult {
  /** Completed requests. */
  requests: number;
  /** Wall time of the run, in seconds, as wrk reports it. */
  seconds: number;
  /** Requests per second. */
  rps: number;
  /** Latency percentiles in ms (from `--latency`). */
  p50: number;
  p99: number;
  /** Responses with a status outside 2xx/3xx. */
  non2xx: number;
  /** Socket errors (connect, read, write, timeout) added up. */
  socketErrors: number;
}

/** One load: a request repeated on keep-alive connections. */
export interface WrkLoad {
  url: string;
  method?: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

/** Options of {@link runWrk}. */
export interface WrkOptions {
  /** Seconds to run. */
  duration: number;
  connections: number;
  /** CPU list for `taskset -c`, or `undefined` for no pinning. */
  cpus: string | undefined;
  /** Folder for the generated Lua script. */
  scratch: string;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

/** Parses wrk's latency like `812.00us`, `1.23ms`, `2.01s` to ms. */
export function parseLatency(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) return Number.NaN;
  return Number(m[1]) * UNIT_MS[m[2]!]!;
}

/**
 * Parses the report wrk prints with `--latency`.
 * @throws {Error} when the report has no `Requests/sec` line (wrk failed).
 */
export function parseWrkReport(report: string): WrkResult {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(report);
  const total = /(\d+) requests in ([\d.]+)(us|ms|s|m),/.exec(report);
  if (!rps || !total) throw new Error(`wrk printed no result:\n${report}`);
  const percentile = (p: string) => {
    const m = new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(report);
    return m ? parseLatency(m[1]!) : Number.NaN;
  };
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(report);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(report);
  return {
    requests: Number(total[1]),
    seconds: (Number(total[2]) * UNIT_MS[total[3]!]!) / 1000,
    rps: Number(rps[1]),
    p50: percentile('50'),
    p99: percentile('99'),
    non2xx: non2xx ? Number(non2xx[1]) : 0,
    socketErrors: errors ? errors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
  };
}

/** Lua for wrk: a fixed method, headers and body (wrk's `-H` cannot set a body). */
export function wrkScript(load: WrkLoad): string {
  const lines = [`wrk.method = ${JSON.stringify(load.method ?? 'GET')}`];
  for (const [name, value] of Object.entries(load.headers))
    lines.push(`wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`);
  if (load.body !== undefined) lines.push(`wrk.body = ${JSON.stringify(load.body)}`);
  return `${lines.join('\n')}\n`;
}

let scripts = 0;

/**
 * Runs wrk with one thread (the load the reference figures use) and `--latency`.
 * The run stops by itself after `duration` seconds (wrk's own timer; a 30 s margin kills it otherwise).
 */
export function runWrk(load: WrkLoad, options: WrkOptions): Promise<WrkResult> {
  const script = join(options.scratch, `load-${++scripts}.lua`);
  writeFileSync(script, wrkScript(load));
  const wrk = [
    'wrk',
    '-t1',
    `-c${options.connections}`,
    `-d${options.duration}s`,
    '--timeout',
    '5s',
    '--latency',
    '-s',
    script,
    load.url,
  ];
  const argv = options.cpus === undefined ? wrk : ['taskset', '-c', options.cpus, ...wrk];
  return new Promise((resolve, reject) => {
    execFile(
      argv[0]!,
      argv.slice(1),
      { timeout: (options.duration + 30) * 1000, maxBuffer: 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          reject(new Error(`${argv.join(' ')} failed: ${err.message}\n${stderr}`));
          return;
        }
        try {
          resolve(parseWrkReport(stdout));
        } catch (parseError) {
          reject(parseError);
        }
      },
    );
  });
}
