/**
 * Fuzzing the JSON scanner (src/aliases/json-scan.ts over json-scan.c in WebAssembly) with arbitrary
 * bytes and arbitrary JSON: it agrees with a strict RFC 8259 oracle on which texts are JSON; cutting a
 * text into chunks anywhere changes neither the verdict, nor the error and its offset, nor the members
 * reported; and scanners of several texts fed in turns (as the responses of one process are) give what
 * each gives alone. (Goes with `src/aliases/` at 1.0.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  JsonStreamScanner,
  KeyNames,
  SCAN_OK,
  type ScanHandler,
  type StreamScanHandler,
  scanJson,
} from '../../../src/aliases/json-scan.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from '../budget.ts';
import { anyBody, jsonText, parseStrict } from './arbitraries.ts';

const KEYS = ['metadata', 'tags', 'requiredMetadataTypes', 'requiredTags', 'm\\u0065tadata'];
const names = new KeyNames(['metadata', 'tags', 'requiredMetadataTypes', 'requiredTags']);

/** A scan in progress: its scanner, its text cut into chunks, what it reported so far. */
interface Scan {
  readonly scanner: JsonStreamScanner;
  readonly chunks: Buffer[];
  readonly events: string[];
  readonly handler: StreamScanHandler;
  status: number;
  next: number;
}

function start(body: Buffer, cuts: readonly number[]): Scan {
  const points = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const cut of [...points, body.length]) {
    chunks.push(body.subarray(from, cut));
    from = cut;
  }
  const events: string[] = [];
  return {
    scanner: new JsonStreamScanner(names, 64),
    chunks,
    events,
    handler: {
      onMember: (depth, name, offset) => events.push(`member ${depth} ${name} ${offset}`) > 0,
      onValue: (depth, offset) => events.push(`value ${depth} ${offset}`) > 0,
      onObjectEnd: (depth, offset) => events.push(`end ${depth} ${offset}`) > 0,
    },
    status: SCAN_OK,
    next: 0,
  };
}

/** Feeds the next chunk (or ends the scan); false once the scan is over. */
function step(scan: Scan): boolean {
  if (scan.status !== SCAN_OK || scan.next > scan.chunks.length) return false;
  scan.status =
    scan.next < scan.chunks.length
      ? scan.scanner.write(scan.chunks[scan.next]!, scan.handler)
      : scan.scanner.end();
  scan.next++;
  return true;
}

function result(scan: Scan) {
  return { status: scan.status, error: scan.scanner.error, events: scan.events };
}

function alone(body: Buffer, cuts: readonly number[]) {
  const scan = start(body, cuts);
  while (step(scan));
  return result(scan);
}

const bodies = fc.oneof(
  anyBody(KEYS),
  jsonText(KEYS).map((t) => Buffer.from(t)),
);

describe('the JSON scanner under fuzzing', () => {
  it(
    'accepts exactly the strict UTF-8 JSON texts',
    () => {
      const noop: ScanHandler = { onKey() {}, onValue() {}, onObjectEnd() {} };
      fc.assert(
        fc.property(anyBody(KEYS), (body) => {
          const error = scanJson(body, names, noop, Number.POSITIVE_INFINITY);
          expect(error === undefined, body.toString('latin1')).toBe(parseStrict(body).valid);
          if (error !== undefined) {
            expect(error.offset).toBeGreaterThanOrEqual(0);
            expect(error.offset).toBeLessThanOrEqual(body.length);
          }
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'gives the same verdict, error offset and message, and members wherever the text is cut',
    () => {
      fc.assert(
        fc.property(bodies, fc.array(fc.nat(), { maxLength: 6 }), (body, cuts) => {
          expect(alone(body, cuts)).toEqual(alone(body, []));
        }),
        fuzzParams(),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it(
    'gives each text what it gives alone when the scanners of several texts take turns',
    () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(bodies, fc.array(fc.nat(), { maxLength: 6 })), { minLength: 2, maxLength: 5 }),
          fc.array(fc.nat(), { minLength: 1, maxLength: 40 }),
          (texts, turns) => {
            const scans = texts.map(([body, cuts]) => start(body, cuts));
            // The scanners take turns in the given order, then each runs to its end.
            for (const turn of turns) step(scans[turn % scans.length]!);
            for (const scan of scans) while (step(scan));
            texts.forEach(([body, cuts], k) => {
              expect(result(scans[k]!)).toEqual(alone(body, cuts));
            });
          },
        ),
        fuzzParams(0.5),
      );
    },
    FUZZ_TIMEOUT_MS,
  );
});
