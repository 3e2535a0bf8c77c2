/**
 * The pino logger, with redaction of every credential-bearing field (SPEC §8).
 */
import { type DestinationStream, type Logger, pino } from 'pino';

/**
 * Paths redacted wherever they appear in a log object. The request log never serializes headers, so
 * these are a second line of defence for code that logs a request or response object by mistake.
 */
export const REDACTED_PATHS: readonly string[] = Object.freeze([
  'req.headers.cookie',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  'headers.cookie',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["set-cookie"]',
  'cookies',
  'req.cookies',
]);

/**
 * Creates the process logger: JSON lines, ISO timestamps, credential fields redacted.
 * @param level A pino level name.
 * @param extraRedactions More paths to censor (e.g. a configured API-key header name).
 * @param destination Where lines go (default stdout); tests pass a memory stream.
 */
export function createLogger(
  level: string,
  extraRedactions: readonly string[] = [],
  destination?: DestinationStream,
): Logger {
  const options = {
    level,
    base: { service: 'compat-shim' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...REDACTED_PATHS, ...extraRedactions], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
