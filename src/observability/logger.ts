/**
 * The pino logger, with redaction of every credential-bearing field (SPEC §8).
 */
import { type DestinationStream, type Logger, pino } from 'pino';

/**
 * Paths redacted wherever they appear in a log object. The request log never serializes headers, so
 * these are a second line of defence for code that logs a request or response object by mistake.
 */
const REDACTED_PATHS: readonly string[] = Object.freeze([
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
 * @param destination Where lines go (default: stdout, {@link stdoutPerTurn}); tests pass a memory stream.
 * @returns The pino logger.
 * @throws {Error} from pino for an unknown `level` or a malformed redaction path (e.g. `a..b`).
 */
export function createLogger(
  level: string,
  extraRedactions: readonly string[] = [],
  destination?: DestinationStream,
): Logger {
  const paths = [...REDACTED_PATHS, ...extraRedactions];
  const options = {
    level,
    base: { service: 'compat-shim' },
    timestamp: isoTimePerSecond(),
    redact: { paths, censor: '[redacted]' },
  };
  const logger = pino(options, destination ?? stdoutPerTurn());
  redactionOf.set(logger, paths);
  return logger;
}

/** The redaction paths of each logger made by {@link createLogger}. */
const redactionOf = new WeakMap<Logger, readonly string[]>();

/**
 * For lines a caller builds itself (the request log): picks, per line, a logger that writes exactly
 * what `logger` would. When no redaction path can reach into the line (checked on its first two
 * levels: a path's first segment is a key of the line and, for a longer path, its second segment a key
 * of that value, or a wildcard), that is a child of `logger` without redaction: pino copies every
 * object under a redacted key (`req`, `res`) and walks every path for each line, about 3% of the
 * shim's CPU per request on the pass-through path (bench/profile.ts), to censor what the request log
 * never writes. Otherwise, and for a logger {@link createLogger} did not make, `logger` itself.
 * @param logger A logger from {@link createLogger}.
 * @returns `(line) => Logger`, pure and cheap (a few property checks per line).
 * @throws Nothing (nor does the returned function).
 * @example
 * const pick = loggerForLine(logger);
 * pick({ req: { method: 'GET', path: '/x' } }).info(line, 'request completed'); // no redaction pass
 * pick({ req: { headers: {} } }); // → logger (req.headers.cookie could be in it)
 */
export function loggerForLine(logger: Logger): (line: Readonly<Record<string, unknown>>) => Logger {
  const paths = redactionOf.get(logger);
  const reach = paths === undefined ? undefined : redactionReach(paths);
  if (reach === undefined) return () => logger;
  const plain = logger.child({}, { redact: [] });
  const roots = Object.entries(reach);
  return (line) => {
    for (const [root, inner] of roots) {
      if (!Object.hasOwn(line, root)) continue;
      if (inner === true) return logger;
      const value = line[root];
      if (typeof value !== 'object' || value === null) continue;
      for (const second of inner) if (second in value) return logger;
    }
    return plain;
  };
}

/** A level {@link lineWriter} writes at. */
export type LineLevel = 'info' | 'error';

/**
 * For lines a caller builds itself on the hot path (the request log, once per request): writes a line
 * exactly as `logger[level](line, msg)` would, byte for byte, with one `JSON.stringify` of the line
 * where pino serializes it member by member (a string per member, `JSON.stringify` for each object
 * member, then their concatenation). Measured with `bench/ab.ts` on the pass-through (thirty-third
 * session, bench/RESULTS.md): 0.94–0.95× the shim's CPU per request.
 *
 * The text is pino's for the options {@link createLogger} sets (no formatters, mixin, nested key or
 * message prefix; `msg`; `\n`): `{"level":N` and the logger's own timestamp, bindings and stream
 * (`pino.symbols`), then the line's members and `"msg"`. pino writes the line itself, as `logger` would,
 * for a logger {@link createLogger} did not make, a stream that wants pino's metadata (a multistream),
 * a line a redaction path can reach into ({@link loggerForLine}), a member pino has a serializer for
 * (`err`), and a line `JSON.stringify` refuses (a cycle, a BigInt: pino's safe serializer writes them).
 * The one difference: a lone surrogate in a string of under 101 characters, which pino writes as it is
 * (a byte sequence that is not UTF-8 once encoded), is escaped (`\ud800`), as JSON.stringify does (and
 * pino on Node 25 and later).
 * @param logger A logger from {@link createLogger}.
 * @returns `(level, line, msg) => void`: writes `line` (a plain object of JSON data) with message
 *   `msg` at `level`, if the logger's level lets it through.
 * @throws Nothing of its own; the returned function throws what the stream's `write` throws, as pino's
 *   methods do.
 * @example
 * lineWriter(logger)('info', { reqId: 1, res: { statusCode: 200 } }, 'request completed');
 * // → {"level":30,"time":"…","service":"compat-shim","reqId":1,"res":{"statusCode":200},"msg":"request completed"}
 */
export function lineWriter(
  logger: Logger,
): (level: LineLevel, line: Readonly<Record<string, unknown>>, msg: string) => void {
  const pick = loggerForLine(logger);
  const internals = logger as unknown as Record<symbol, unknown>;
  const stream = internals[pino.symbols.streamSym] as DestinationStream & Record<symbol, unknown>;
  // A logger createLogger did not make is `pick`'s every time (loggerForLine), so pino writes for it.
  const wantsMetadata = stream[pino.symbols.needsMetadataGsym] === true;
  const time = internals[pino.symbols.timeSym] as () => string;
  const bindings = internals[pino.symbols.chindingsSym] as string;
  const serialized = Object.keys(internals[pino.symbols.serializersSym] as object);
  return (level, line, msg) => {
    const chosen = pick(line);
    if (wantsMetadata || chosen === logger || serialized.some((key) => Object.hasOwn(line, key))) {
      chosen[level](line, msg);
      return;
    }
    if (!chosen.isLevelEnabled(level)) return;
    let members: string;
    try {
      members = JSON.stringify(line);
    } catch {
      chosen[level](line, msg);
      return;
    }
    const rest = members.length > 2 ? `,${members.slice(1, -1)}` : '';
    stream.write(
      `{"level":${chosen.levels.values[level]}${time()}${bindings}${rest},"msg":${JSON.stringify(msg)}}\n`,
    );
  };
}

/**
 * The first two levels of redaction paths: first segment → `true` (the whole value is censored, or
 * any key below it may be) or the second segments below it. `undefined` when a path starts with a
 * wildcard (any line may be redacted). Paths use pino's syntax: `a.b`, `a["b-c"]`, `a.*`.
 */
function redactionReach(paths: readonly string[]): Record<string, true | string[]> | undefined {
  const reach: Record<string, true | string[]> = Object.create(null);
  for (const path of paths) {
    const segments = [...path.matchAll(/[^.[\]]+|\[([^[\]]*?)\]/g)].map((m) =>
      m[1] === undefined ? (m[0] as string) : m[1].replace(/^(["'`])(.*)\1$/, '$2'),
    );
    const [first, second] = segments;
    if (first === undefined || first === '*') return undefined;
    const known = reach[first];
    if (second === undefined || second === '*') reach[first] = true;
    else if (known === undefined) reach[first] = [second];
    else if (known !== true) known.push(second);
  }
  return reach;
}

/**
 * pino's ISO timestamp (`,"time":"2026-11-23T21:05:53.123Z"`, as `pino.stdTimeFunctions.isoTime`
 * writes it), with `Date#toISOString` called once per second: the text up to the seconds is kept and
 * the milliseconds appended. `toISOString` per line was about 2% of the shim's CPU per request on the
 * pass-through path (bench/profile.ts). Same text as formatting every time; a clock that is not an
 * integer number of ms is formatted in full (and a NaN throws `RangeError`, as pino's does).
 * @param now The clock, ms since the epoch (default `Date.now`; tests pass a fake one).
 * @returns A pino `timestamp` function.
 * @throws Nothing itself; the returned function throws {RangeError} when `now()` is not a valid time
 *   (NaN, ±Infinity, beyond ±8.64e15 ms).
 * @example
 * isoTimePerSecond(() => 1)() // → ',"time":"1970-01-01T00:00:00.001Z"'
 */
export function isoTimePerSecond(now: () => number = Date.now): () => string {
  let second = Number.NaN;
  let prefix = '';
  return () => {
    const ms = now();
    if (!Number.isInteger(ms)) return `,"time":"${new Date(ms).toISOString()}"`;
    const s = Math.floor(ms / 1000);
    if (s !== second) {
      const iso = new Date(s * 1000).toISOString(); // always ends in `.000Z`
      second = s;
      prefix = `,"time":"${iso.slice(0, -4)}`;
    }
    const milli = ms - s * 1000;
    return `${prefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z"`;
  };
}

/** Characters of lines (about their bytes: they are mostly ASCII) kept within one event-loop turn before they are written at once. */
const TURN_BUFFER_LENGTH = 8 * 1024;

/** What {@link stdoutPerTurn} uses of a sonic-boom stream in `contentMode: 'buffer'` (its types say strings only). */
interface ByteDestination {
  write(bytes: Uint8Array): boolean;
  flushSync(): void;
}

/**
 * Standard output, written once per event-loop turn: the lines logged in one turn (under load, the
 * request lines of the responses that finished in it) are kept as they come and go out joined, in one
 * synchronous `write(2)` at the end of the turn (`setImmediate`), or at once when they reach
 * {@link TURN_BUFFER_LENGTH}; no line waits for a timer or for more traffic. One write per line cost
 * about 6 µs of the shim's CPU per request on the benchmark machine (bench/RESULTS.md).
 *
 * The lines are joined here and handed to sonic-boom as bytes (`contentMode: 'buffer'`), not as
 * strings: for each string it is given, sonic-boom 4 measures the UTF-8 length of the line and of
 * all the text pending before it (a string it grows with `+=`, flattened again by each measure), then
 * encodes the pending text twice, to write it and to count what was written. Measured with
 * `bench/ab.ts` on the pass-through (thirty-third session, bench/RESULTS.md): 0.95× the shim's CPU per
 * request. Lines still kept when the process exits (`process.exit`, an uncaught exception) are
 * written synchronously on `exit`; only a SIGKILL loses them, at most one turn's worth.
 */
function stdoutPerTurn(): DestinationStream {
  const stdout = pino.destination({
    dest: 1,
    sync: true,
    contentMode: 'buffer',
  }) as unknown as ByteDestination;
  let lines: string[] = [];
  let length = 0;
  let scheduled = false;
  const flush = () => {
    if (lines.length === 0) return;
    const text = lines.join('');
    lines = [];
    length = 0;
    stdout.write(Buffer.from(text));
  };
  const flushAtEndOfTurn = () => {
    scheduled = false;
    flush();
  };
  process.once('exit', () => {
    try {
      // The kept lines first, written at once (sync mode): a reader gone (EPIPE) is an 'error' on which
      // pino makes `flushSync` (and `write`) a no-op. sonic-boom's `flushSync` retries every write error
      // but EAGAIN, forever (4.2.1): called first on a broken stdout, it held the exiting process
      // in a loop that only SIGKILL ended (docs/reliability.md fix 73).
      flush();
      stdout.flushSync();
    } catch {
      // stdout is gone otherwise (EBADF): nothing left to tell anyone
    }
  });
  return {
    write(line: string) {
      lines.push(line);
      length += line.length;
      if (length >= TURN_BUFFER_LENGTH) flush();
      if (!scheduled) {
        scheduled = true;
        setImmediate(flushAtEndOfTurn);
      }
    },
  };
}
