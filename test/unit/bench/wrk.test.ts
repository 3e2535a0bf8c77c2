import { describe, expect, it } from 'vitest';
import { parseLatency, parseWrkReport, wrkScript } from '../../../bench/lib/wrk.ts';

const REPORT = `Running 5s test @ http://127.0.0.1:8180/missions/c0000000-0000-4000-8000-000000000001
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.08ms    6.18ms  64.06ms   93.93%
    Req/Sec     9.47k     2.22k   11.26k    57.45%
  Latency Distribution
     50%  812.00us
     75%    1.94ms
     90%    2.80ms
     99%    1.02s
  47146 requests in 5.06s, 11.83MB read
  Socket errors: connect 0, read 2, write 1, timeout 4
  Non-2xx or 3xx responses: 12
Requests/sec:   9317.24
Transfer/sec:      2.34MB
`;

describe('wrk report', () => {
  it('reads throughput, latency percentiles in ms and errors', () => {
    expect(parseWrkReport(REPORT)).toEqual({
      requests: 47146,
      seconds: 5.06,
      rps: 9317.24,
      p50: 0.812,
      p99: 1020,
      non2xx: 12,
      socketErrors: 7,
    });
  });

  it('counts no errors when wrk prints none', () => {
    const clean = REPORT.replace(/\s+Socket errors.*\n/, '\n').replace(/\s+Non-2xx.*\n/, '\n');
    expect(parseWrkReport(clean)).toMatchObject({ non2xx: 0, socketErrors: 0 });
  });

  it('fails on a report without results', () => {
    expect(() => parseWrkReport('unable to connect to 127.0.0.1:1 Connection refused')).toThrow(/no result/);
  });

  it('converts latency units', () => {
    expect(parseLatency('250us')).toBeCloseTo(0.25);
    expect(parseLatency('2.5ms')).toBe(2.5);
    expect(parseLatency('1.5s')).toBe(1500);
    expect(parseLatency('fast')).toBeNaN();
  });

  it('writes a Lua script with method, headers and body, quoted', () => {
    const lua = wrkScript({
      url: 'http://127.0.0.1/missions',
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{"name":"a\\"b"}',
    });
    expect(lua).toBe(
      'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = "{\\"name\\":\\"a\\\\\\"b\\"}"\n',
    );
  });
});
