import { Writable } from 'node:stream';
import fc from 'fast-check';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  createLogger,
  isoTimePerSecond,
  type LineLevel,
  lineWriter,
  loggerForLine,
} from '../../../src/observability/logger.ts';

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

describe('lineWriter', () => {
  const withoutTime = (text: string) => text.replace(/"time":"[^"]*"/g, '"time":"-"');
  /** What `write` wrote, next to what `logger[level](line, msg)` wrote for the same line. */
  function both(
    level: LineLevel,
    line: Record<string, unknown>,
    msg = 'request completed',
    extra: string[] = [],
  ) {
    const ours = capture('info', extra);
    lineWriter(ours.logger)(level, line, msg);
    const pinos = capture('info', extra);
    pinos.logger[level](line, msg);
    return { ours: withoutTime(ours.text()), pinos: withoutTime(pinos.text()) };
  }

  it("writes any line of JSON data byte for byte as the logger's own method would", () => {
    // Strings of whole graphemes: pino writes a lone surrogate as it is (see the next test).
    const value = fc.jsonValue({ stringUnit: 'grapheme' });
    fc.assert(
      fc.property(
        fc.constantFrom<LineLevel>('info', 'error'),
        fc.dictionary(fc.string({ unit: 'grapheme' }), value),
        fc.string({ unit: 'grapheme' }),
        (level, line, msg) => {
          const { ours, pinos } = both(level, line, msg);
          expect(ours).toBe(pinos);
        },
      ),
    );
    const request = {
      reqId: 7,
      req: { method: 'GET', path: '/missions/1' },
      res: { statusCode: 502 },
      responseTime: 3,
      remoteAddress: '127.0.0.1',
      clientVersion: undefined,
      route: 'GET /missions/:id',
      userAgent: 'curl/8 "quoted" \\ \u0007',
      aliases: ['tags'],
      aborted: true,
    };
    const { ours, pinos } = both('error', request);
    expect(ours).toBe(pinos);
    expect(ours).toContain('"level":50,"time":"-","service":"compat-shim","reqId":7,"req":{"method":"GET"');
    expect(both('info', {}).ours).toBe(both('info', {}).pinos);
  });

  it('escapes a lone surrogate that pino writes as it is, so the line stays UTF-8 JSON', () => {
    const { ours } = both('info', { userAgent: 'a\ud800b' });
    expect(ours).toContain('"userAgent":"a\\ud800b"');
    expect(JSON.parse(ours)).toMatchObject({ userAgent: 'a\ud800b' });
  });

  it('lets pino write a line only it can: a redaction path reaches it, a serializer applies, a cycle, a BigInt', () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = cycle;
    const lines: Array<Record<string, unknown>> = [
      { headers: { cookie: 'authtoken=secret-1' } },
      { req: { headers: { 'x-service-key': 'secret-2' } } },
      { err: new Error('upstream reset') },
      { cycle },
      { big: 2n ** 64n },
    ];
    for (const line of lines) {
      const { ours, pinos } = both('info', line, 'request completed', ['req.headers["x-service-key"]']);
      expect(ours).toBe(pinos);
      expect(ours).not.toContain('secret-');
    }
    expect(both('info', { err: new Error('upstream reset') }).ours).toContain(
      '"stack":"Error: upstream reset',
    );
    expect(both('info', { cycle }).ours).toContain('"self":"[Circular]"');
    expect(both('info', { big: 2n ** 64n }).ours).toContain('"big":18446744073709551616');
  });

  it("honours the logger's level, and writes through a logger that createLogger did not make", () => {
    const quiet = capture('warn');
    const write = lineWriter(quiet.logger);
    write('info', { reqId: 1 }, 'request completed');
    expect(quiet.text()).toBe('');
    write('error', { reqId: 2 }, 'request completed');
    expect(quiet.lines()).toMatchObject([{ level: 50, reqId: 2, msg: 'request completed' }]);

    let text = '';
    const foreign = pino(
      { base: { app: 'x' }, messageKey: 'message' },
      {
        write: (s: string) => {
          text += s;
        },
      },
    );
    lineWriter(foreign)('info', { reqId: 3 }, 'request completed');
    expect(JSON.parse(text)).toMatchObject({ app: 'x', reqId: 3, message: 'request completed' });
  });
});
