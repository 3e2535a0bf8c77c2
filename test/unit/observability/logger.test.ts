import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createLogger, isoTimePerSecond, loggerForLine } from '../../../src/observability/logger.ts';

function capture(level = 'info', extra: string[] = []) {
  let text = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const logger = createLogger(level, extra, sink);
  return {
    logger,
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('createLogger', () => {
  it('writes one JSON line with level, ISO time, service and message', () => {
    const { logger, lines } = capture();
    logger.info({ port: 8080 }, 'listening');
    const [line] = lines();
    expect(line).toMatchObject({ level: 30, service: 'compat-shim', port: 8080, msg: 'listening' });
    expect(String(line?.time)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  it('redacts credentials wherever a request or response object is logged by mistake', () => {
    const { logger, text } = capture('info', ['req.headers["x-service-key"]']);
    const secrets = ['cookie-secret', 'bearer-secret', 'apikey-secret', 'setcookie-secret', 'custom-secret'];
    logger.info({
      req: {
        headers: {
          cookie: `authtoken=${secrets[0]}`,
          authorization: `Bearer ${secrets[1]}`,
          'x-api-key': secrets[2],
          'x-service-key': secrets[4],
          'user-agent': 'legacy/0.59',
        },
      },
      res: { headers: { 'set-cookie': [`refreshtoken=${secrets[3]}`] } },
    });
    logger.info({
      headers: { authorization: secrets[1], cookie: secrets[0] },
      cookies: { authtoken: secrets[0] },
    });
    const out = text();
    for (const s of secrets) expect(out).not.toContain(s);
    expect(out).toContain('[redacted]');
    expect(out).toContain('legacy/0.59');
  });

  it('honours the level', () => {
    const { logger, lines } = capture('warn');
    logger.info('hidden');
    logger.warn('shown');
    expect(lines().map((l) => l.msg)).toEqual(['shown']);
  });
});

describe('isoTimePerSecond', () => {
  it("writes pino's isoTime text for every millisecond, formatting each second once", () => {
    let clock = Date.UTC(2026, 10, 23, 21, 5, 53, 123);
    let formatted = 0;
    const time = isoTimePerSecond(() => clock);
    const toISOString = Date.prototype.toISOString;
    const expected = (ms: number) => `,"time":"${toISOString.call(new Date(ms))}"`;
    Date.prototype.toISOString = function (this: Date) {
      formatted++;
      return toISOString.call(this);
    };
    try {
      expect(time()).toBe(',"time":"2026-11-23T21:05:53.123Z"');
      expect(time()).toBe(',"time":"2026-11-23T21:05:53.123Z"');
      for (const step of [1, -120, 996, 1, 0]) {
        clock += step;
        expect(time()).toBe(expected(clock));
      }
      expect(formatted).toBe(2); // second 21:05:53, then 21:05:54 (53.004 + 996 ms)
    } finally {
      Date.prototype.toISOString = toISOString;
    }
  });

  it.each([
    0, 1, 9, 10, 99, 100, 999, 1000, -1, -999, -1000, -1001, 951_782_400_000, 253_402_300_799_999,
    253_402_300_800_000, -62_198_755_200_001, 8_640_000_000_000_000,
  ])('gives the text of toISOString at %i ms, also for years outside 0000–9999', (ms) => {
    expect(isoTimePerSecond(() => ms)()).toBe(`,"time":"${new Date(ms).toISOString()}"`);
  });

  it('formats a fractional clock in full and throws on NaN, as pino does', () => {
    expect(isoTimePerSecond(() => 1.5)()).toBe(`,"time":"${new Date(1.5).toISOString()}"`);
    expect(isoTimePerSecond(() => Number.NaN)).toThrow(RangeError);
  });

  it('gives the same text as pino.stdTimeFunctions.isoTime', () => {
    const at = Date.UTC(1999, 11, 31, 23, 59, 59, 999);
    const original = Date.now;
    Date.now = () => at;
    try {
      expect(isoTimePerSecond(() => at)()).toBe(pino.stdTimeFunctions.isoTime());
    } finally {
      Date.now = original;
    }
  });
});

describe('loggerForLine', () => {
  const requestLine = () => ({
    reqId: 7,
    req: { method: 'GET', path: '/missions/1' },
    res: { statusCode: 200 },
    responseTime: 3,
    clientVersion: '1.0.0',
    route: '/missions/:id',
    credential: 'api-key',
    aliases: ['tags'],
  });
  const withoutTime = (text: string) => text.replace(/"time":"[^"]*"/g, '"time":"-"');

  it('writes a request line without the redaction pass, byte for byte as the logger would', () => {
    const { logger, text } = capture('info', ['req.headers["x-service-key"]']);
    const pick = loggerForLine(logger);
    expect(pick(requestLine())).not.toBe(logger);
    logger.info(requestLine(), 'request completed');
    pick(requestLine()).info(requestLine(), 'request completed');
    pick(requestLine()).error(requestLine(), 'request completed');
    logger.error(requestLine(), 'request completed');
    const [a, b, c, d, end] = withoutTime(text()).split('\n');
    expect(end).toBe('');
    expect(a).toContain('"req":{"method":"GET","path":"/missions/1"},"res":{"statusCode":200}');
    expect(b).toBe(a);
    expect(c).toBe(d);
  });

  it('keeps the logger for any line a redaction path can reach, so credentials stay censored', () => {
    const { logger, text } = capture('info', ['req.headers["x-service-key"]', 'session.*']);
    const pick = loggerForLine(logger);
    const lines: Array<Record<string, unknown>> = [
      { req: { method: 'GET', headers: { cookie: 'secret-1' } } },
      { res: { statusCode: 200, headers: { 'set-cookie': 'secret-2' } } },
      { headers: { authorization: 'secret-3' } },
      { cookies: 'secret-4' },
      { req: { cookies: { a: 'secret-5' } } },
      { req: { headers: { 'x-service-key': 'secret-6' } } },
      { session: { token: 'secret-7' } },
    ];
    for (const line of lines) {
      expect(pick(line)).toBe(logger);
      pick(line).info(line, 'request completed');
    }
    for (let i = 1; i <= 7; i++) expect(text()).not.toContain(`secret-${i}`);
    expect(pick({ headers: 'not an object', req: null })).not.toBe(logger);
  });

  it('always keeps a logger that createLogger did not make, or whose paths start with a wildcard', () => {
    const foreign = pino({ enabled: false });
    expect(loggerForLine(foreign)(requestLine())).toBe(foreign);
    const { logger } = capture('info', ['*.password']);
    expect(loggerForLine(logger)(requestLine())).toBe(logger);
  });
});
