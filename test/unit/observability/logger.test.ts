import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/observability/logger.ts';

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
