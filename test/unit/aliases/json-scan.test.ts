import { describe, expect, it } from 'vitest';
import {
  injectScanFailure,
  JsonStreamScanner,
  KeyNames,
  MAX_KEY_NAME_BYTES,
  MAX_KEY_NAMES,
  MAX_SCAN_NESTING,
  SCAN_FAILED,
  SCAN_INVALID,
  SCAN_OK,
  SCAN_STOPPED,
  SCAN_TOO_DEEP,
  type ScanHandler,
  type StreamScanHandler,
  scanJson,
  skipWhitespace,
  skipWhitespaceBack,
} from '../../../src/aliases/json-scan.ts';
import { refuseNextMemoryGrow } from './helpers.ts';

/** Records every handler call as a readable line. */
function record(text: string | Buffer, names: string[], maxDepth = Number.POSITIVE_INFINITY) {
  const events: string[] = [];
  const handler: ScanHandler = {
    onKey: (depth, name, keyStart, keyEnd) =>
      events.push(`key ${depth} ${names[name]} ${keyStart}-${keyEnd}`),
    onValue: (depth, valueEnd) => events.push(`value ${depth} ${valueEnd}`),
    onObjectEnd: (depth, close) => events.push(`end ${depth} ${close}`),
  };
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  const error = scanJson(bytes, new KeyNames(names), handler, maxDepth);
  return { events, error };
}

const errorOf = (text: string | Buffer) => record(text, []).error;

describe('scanJson — reported members', () => {
  it('reports matching members with offsets, nested like the text', () => {
    //                    0         1         2         3
    //                    0123456789012345678901234567890123456
    const { events, error } = record('{"tags":{"tags":1},"x":2,"tags":[3]}', ['tags']);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      'key 1 tags 1-7',
      'key 2 tags 9-15',
      'value 2 17',
      'end 2 17',
      'value 1 18',
      'key 1 tags 25-31',
      'value 1 35',
      'end 1 35',
    ]);
  });

  it('reports only down to maxDepth but validates deeper text', () => {
    expect(record('{"tags":{"tags":1}}', ['tags'], 1).events).toEqual([
      'key 1 tags 1-7',
      'value 1 18',
      'end 1 18',
    ]);
    expect(record('{"tags":{"tags":1,}}', ['tags'], 1).error?.offset).toBe(18);
  });

  it('reports members of objects inside arrays at their depth', () => {
    expect(record('[{"a":1},[{"tags":null}]]', ['tags']).events).toEqual([
      'key 3 tags 11-17',
      'value 3 22',
      'end 3 22',
    ]);
  });

  it('decodes escaped keys before comparing', () => {
    for (const key of ['t\\u0061gs', '\\u0074\\u0061\\u0067\\u0073', 'ta\\u0067s']) {
      expect(record(`{"${key}":1}`, ['tags']).events[0]).toMatch(/^key 1 tags/);
    }
    expect(record('{"t\\u0061g":1,"tags\\n":2,"t\\"ags":3}', ['tags']).events).toEqual([]);
    expect(record(`{"${'\\u0074'.repeat(10)}":1}`, ['tags']).events).toEqual([]);
  });

  it('gives the whole key token of a name with a quote or a backslash (escaped in the text)', () => {
    // The bytes: {"a\"b":1,"c\\":2}
    //            0         1
    //            012345678901234567
    const text = '{"a\\"b":1,"c\\\\":2}';
    expect(record(text, ['a"b', 'c\\']).events).toEqual([
      'key 1 a"b 1-7',
      'value 1 9',
      'key 1 c\\ 10-15',
      'value 1 17',
      'end 1 17',
    ]);
  });

  it('compares unescaped keys as bytes, including non-ASCII names', () => {
    expect(record('{"tag":1,"tagz":2,"tags":3,"tägs":4}', ['tags', 'tägs']).events).toEqual([
      'key 1 tags 18-24',
      'value 1 26',
      'key 1 tägs 27-34',
      'value 1 36',
      'end 1 36',
    ]);
    expect(record('{"\\u00e4":1,"ä":2}', ['ä']).events).toHaveLength(5);
  });

  it('does not report string values equal to a name', () => {
    expect(record('["tags",{"a":"tags"}]', ['tags']).events).toEqual([]);
  });
});

/** Texts that are not JSON, the offset of their first wrong byte and what the message says. */
const ERRORS: [string, number, RegExp][] = [
  ['', 0, /expected a JSON value but found the end of the text/],
  ['   ', 3, /expected a JSON value/],
  ['{"a":1,}', 7, /expected a string key but found '}'/],
  ['{"a" 1}', 5, /expected ':' after the key but found '1'/],
  ['{"a":1 "b":2}', 7, /expected ',' or '}' but found '"'/],
  ['[1 2]', 3, /expected ',' or '\]' but found '2'/],
  ['[1,]', 3, /expected a JSON value but found '\]'/],
  ['{"a":1}x', 7, /unexpected 'x' after the JSON value/],
  ['"abc', 4, /unterminated string/],
  ['{"abc', 5, /unterminated string/],
  ['"a\\x"', 2, /invalid escape sequence/],
  ['{"a\\u12"', 3, /invalid escape sequence/],
  ['"a\tb"', 2, /unescaped control character byte 0x09 in string/],
  ['{"a\nb":1}', 3, /unescaped control character/],
  ['-', 1, /expected a digit/],
  ['-a', 1, /expected a digit but found 'a'/],
  ['01', 1, /unexpected '1' after the JSON value/],
  ['1.', 2, /expected a digit after '.'/],
  ['1.e5', 2, /expected a digit after '.'/],
  ['1e', 2, /expected a digit in the exponent/],
  ['1e+', 3, /expected a digit in the exponent/],
  ['tru', 0, /expected a JSON value but found 't'/],
  ['nul', 0, /expected a JSON value/],
  ['fals', 0, /expected a JSON value/],
  ['\u00a0{}', 0, /byte 0xc2/],
  ['[true, tRue]', 7, /expected a JSON value but found 't'/],
  ['{"a":nul}', 5, /expected a JSON value but found 'n'/],
  ['[1,-]', 4, /expected a digit but found '\]'/],
  ['{"a":"b\\u00g0"}', 7, /invalid escape sequence/],
  // The printable ASCII range (0x21–0x7e) is quoted, at both its ends; the rest is named by its code.
  ['[!]', 1, /expected a JSON value but found '!'$/],
  ['[~]', 1, /expected a JSON value but found '~'$/],
  ['[1 ]x', 4, /unexpected 'x' after/],
  ['\u007f', 0, /expected a JSON value but found byte 0x7f$/],
  ['[ \u0001]', 2, /expected a JSON value but found byte 0x01$/],
  // A text that ends early: what was expected there, as for a byte.
  ['{"a":1', 6, /^expected ',' or '}' but found the end of the text$/],
  ['[1', 2, /^expected ',' or '\]' but found the end of the text$/],
  ['[[1],{"a":[true]}', 17, /^expected ',' or '\]' but found the end of the text$/],
  ['{', 1, /^expected a string key but found the end of the text$/],
  ['{"a":1,', 7, /^expected a string key but found the end of the text$/],
  ['{"a"', 4, /^expected ':' after the key but found the end of the text$/],
  ['{"a":', 5, /^expected a JSON value but found the end of the text$/],
];

describe('scanJson — errors name the problem and the byte offset', () => {
  it.each(ERRORS)('%j → offset %d', (text, offset, message) => {
    const error = errorOf(text);
    expect(error?.offset).toBe(offset);
    expect(error?.message).toMatch(message);
  });

  it('explains a byte order mark and UTF-16', () => {
    expect(errorOf(Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]))?.message).toMatch(/byte order mark/);
    expect(errorOf(Buffer.from([0xff, 0xfe, 0x7b, 0x00]))?.message).toMatch(/UTF-16/);
    expect(errorOf(Buffer.from([0x00, 0x7b]))?.message).toMatch(/UTF-16/);
    expect(errorOf(Buffer.from('[x'))?.message).not.toMatch(/UTF-16|byte order/);
  });
});

describe('scanJson — UTF-8 (RFC 8259 §8.1, RFC 3629)', () => {
  const str = (...bytes: number[]) => Buffer.from([0x22, ...bytes, 0x22]);
  it.each([
    [[0x7f]],
    [[0xc2, 0x80]],
    [[0xdf, 0xbf]],
    [[0xe0, 0xa0, 0x80]],
    [[0xed, 0x9f, 0xbf]],
    [[0xee, 0x80, 0x80]],
    [[0xef, 0xbf, 0xbf]],
    [[0xf0, 0x90, 0x80, 0x80]],
    [[0xf4, 0x8f, 0xbf, 0xbf]],
  ])('accepts %j', (bytes) => {
    expect(errorOf(str(...bytes))).toBeUndefined();
  });

  it.each([
    [[0x80], 'lone continuation'],
    [[0xc0, 0x80], 'overlong 2 bytes'],
    [[0xc1, 0xbf], 'overlong 2 bytes'],
    [[0xc2], 'truncated'],
    [[0xc2, 0x41], 'bad continuation'],
    [[0xe0, 0x9f, 0xbf], 'overlong 3 bytes'],
    [[0xe1, 0x80], 'truncated'],
    [[0xe1, 0x80, 0xc0], 'bad third byte'],
    [[0xed, 0xa0, 0x80], 'surrogate U+D800'],
    [[0xf0, 0x8f, 0xbf, 0xbf], 'overlong 4 bytes'],
    [[0xf4, 0x90, 0x80, 0x80], 'above U+10FFFF'],
    [[0xf1, 0x80, 0x80], 'truncated 4 bytes'],
    [[0xf1, 0x80, 0x80, 0x7f], 'bad fourth byte'],
    [[0xf5, 0x80, 0x80, 0x80], 'invalid lead byte'],
    [[0xff], 'invalid byte'],
  ])('rejects %j (%s) at its offset', (bytes) => {
    expect(errorOf(str(...bytes))).toEqual({ offset: 1, message: 'invalid UTF-8 in string' });
  });

  it('rejects a sequence truncated by the end of the text: the string never closes', () => {
    expect(errorOf(Buffer.from([0x22, 0xc2]))).toEqual({ offset: 2, message: 'unterminated string' });
    expect(errorOf(Buffer.from([0x22, 0xe2, 0x82]))).toEqual({ offset: 3, message: 'unterminated string' });
  });

  it('rejects non-ASCII bytes outside strings', () => {
    expect(errorOf(Buffer.from([0x5b, 0xc3, 0xa4, 0x5d]))?.offset).toBe(1);
  });
});

describe('scanJson — size and depth without recursion', () => {
  it('scans 100,000 levels of nesting', () => {
    const depth = 100_000;
    const text = `${'[{"tags":'.repeat(depth)}0${'}]'.repeat(depth)}`;
    let keys = 0;
    let ends = 0;
    let maxDepth = 0;
    const error = scanJson(
      Buffer.from(text),
      new KeyNames(['tags']),
      {
        onKey: (d) => {
          keys++;
          maxDepth = Math.max(maxDepth, d);
        },
        onValue: () => {},
        onObjectEnd: () => ends++,
      },
      Number.POSITIVE_INFINITY,
    );
    expect(error).toBeUndefined();
    expect(keys).toBe(depth);
    expect(ends).toBe(depth);
    expect(maxDepth).toBe(2 * depth);
  });

  it('rejects 100,000 unclosed levels at the end of the text', () => {
    const text = '['.repeat(100_000);
    expect(errorOf(text)).toEqual({
      offset: 100_000,
      message: 'expected a JSON value but found the end of the text',
    });
  });

  it('scans an object with 1,000,000 members', () => {
    const count = 1_000_000;
    const parts = ['{'];
    for (let k = 0; k < count; k++) parts.push(k === 0 ? '' : ',', `"k${k}":${k}`);
    parts.push(',"tags":true}');
    const { events, error } = record(parts.join(''), ['tags']);
    expect(error).toBeUndefined();
    expect(events).toHaveLength(3);
  });
});

describe('KeyNames', () => {
  it('rejects repeated names', () => {
    expect(() => new KeyNames(['a', 'a'])).toThrow('key names must be distinct: a, a');
  });

  it('matches nothing when empty', () => {
    expect(record('{"":1,"a":2}', []).events).toEqual([]);
  });

  it('can match the empty key', () => {
    expect(record('{"":1}', ['']).events).toEqual(['key 1  1-3', 'value 1 5', 'end 1 5']);
  });
});

describe('skipWhitespace / skipWhitespaceBack', () => {
  it('skip exactly the four JSON whitespace bytes', () => {
    const text = Buffer.from('a \t\r\n\u000bb');
    expect(skipWhitespace(text, 1)).toBe(5);
    expect(skipWhitespaceBack(text, 5)).toBe(1);
    expect(skipWhitespaceBack(Buffer.from('  '), 2)).toBe(0);
  });
});

describe('JsonStreamScanner — the same grammar, chunk by chunk', () => {
  /** Scans `text` one byte per chunk, recording the handler calls (offsets absolute). */
  function bytewise(text: string, names: string[], stopAt = '') {
    const events: string[] = [];
    const handler: StreamScanHandler = {
      onMember: (depth, name, start) => events.push(`member ${depth} ${names[name]} ${start}`) > 0,
      onValue: (depth, end) => events.push(`value ${depth} ${end}`) > 0,
      onObjectEnd: (depth, close) => events.push(`end ${depth} ${close}`) !== 0 && stopAt !== 'end',
    };
    const scanner = new JsonStreamScanner(new KeyNames(names), 1000);
    const bytes = Buffer.from(text);
    let status: number = SCAN_OK;
    for (let k = 0; k < bytes.length && status === SCAN_OK; k++)
      status = scanner.write(bytes.subarray(k, k + 1), handler);
    if (status === SCAN_OK) status = scanner.end();
    return { events, status, error: scanner.error };
  }

  it('reports members with absolute offsets however the text is cut', () => {
    // The text: {"tags":{"t\u0061gs":1},"x":2,"tags":[3] }  (the escaped key is 11 bytes, at 9–19)
    const { events, status } = bytewise('{"tags":{"t\\u0061gs":1},"x":2,"tags":[3] }', ['tags']);
    expect(status).toBe(SCAN_OK);
    expect(events).toEqual([
      'member 1 tags 8',
      'member 2 tags 21',
      'value 2 22',
      'end 2 22',
      'value 1 23',
      'member 1 tags 37',
      'value 1 40',
      'end 1 41',
    ]);
  });

  it.each([
    ['{"a":1,}', 7, /expected a string key but found '}'/],
    ['[1 2]', 3, /expected ',' or '\]' but found '2'/],
    ['{"a":1}x', 7, /unexpected 'x' after the JSON value/],
    ['"a\\x"', 2, /invalid escape sequence/],
    ['[tru]', 1, /expected a JSON value but found 't'/],
    ['[nulL]', 1, /expected a JSON value but found 'n'/],
    ['[-]', 2, /expected a digit/],
    ['"abc', 4, /unterminated string/],
    ['{"a":1', 6, /expected ',' or '}' but found the end of the text/],
    ['', 0, /expected a JSON value but found the end of the text/],
  ])('rejects %j at byte %i', (text, offset, message) => {
    const { status, error } = bytewise(text, []);
    expect(status).toBe(SCAN_INVALID);
    expect(error?.message).toMatch(message);
    expect(error?.offset).toBe(offset);
  });

  it('checks UTF-8 across chunk boundaries', () => {
    const scan = (bytes: number[]) => {
      const scanner = new JsonStreamScanner(new KeyNames([]), 10);
      const handler = { onMember: () => true, onValue: () => true, onObjectEnd: () => true };
      const text = Buffer.from([0x22, ...bytes, 0x22]);
      let status: number = SCAN_OK;
      for (let k = 0; k < text.length && status === SCAN_OK; k++)
        status = scanner.write(text.subarray(k, k + 1), handler);
      return status === SCAN_OK ? scanner.end() : status;
    };
    expect(scan([0xf0, 0x9f, 0x98, 0x80])).toBe(SCAN_OK); // U+1F600
    expect(scan([0xed, 0xa0, 0x80])).toBe(SCAN_INVALID); // a surrogate
    expect(scan([0xc0, 0xaf])).toBe(SCAN_INVALID); // overlong
    expect(scan([0xf4, 0x90, 0x80, 0x80])).toBe(SCAN_INVALID); // above U+10FFFF
  });

  it('stops when a handler returns false, and at maxNesting', () => {
    expect(bytewise('[{"tags":1},{"tags":2}]', ['tags'], 'end').status).toBe(SCAN_STOPPED);
    const scanner = new JsonStreamScanner(new KeyNames([]), 3);
    const handler = { onMember: () => true, onValue: () => true, onObjectEnd: () => true };
    expect(scanner.write(Buffer.from('[[['), handler)).toBe(SCAN_OK);
    expect(scanner.write(Buffer.from('['), handler)).toBe(SCAN_TOO_DEEP);
  });
});

describe('JsonStreamScanner — strings four bytes at a time: lanes, alignment and chunk ends', () => {
  const handlerFor = (events: string[]): StreamScanHandler => ({
    onMember: (depth, name, start) => events.push(`member ${depth} ${name} ${start}`) > 0,
    onValue: (depth, end) => events.push(`value ${depth} ${end}`) > 0,
    onObjectEnd: (depth, close) => events.push(`end ${depth} ${close}`) > 0,
  });

  /** Scans `text` cut at `cuts`, each chunk a slice starting `offset` bytes into its own buffer. */
  function scan(text: Buffer, cuts: readonly number[], offset: number) {
    const events: string[] = [];
    const handler = handlerFor(events);
    const scanner = new JsonStreamScanner(new KeyNames(['tags']), 100);
    let status: number = SCAN_OK;
    let from = 0;
    for (const cut of [...cuts, text.length]) {
      const holder = Buffer.alloc(offset + (cut - from) + 5, 0x22);
      text.copy(holder, offset, from, cut);
      status = scanner.write(holder.subarray(offset, offset + (cut - from)), handler);
      from = cut;
      if (status !== SCAN_OK) break;
    }
    if (status === SCAN_OK) status = scanner.end();
    return { status, error: scanner.error, events };
  }

  // What goes into the string at each lane: plain bytes that stop the word scan, valid escapes and
  // UTF-8, and each kind of invalid byte (bytes, so that invalid UTF-8 can be written).
  const specials: [string, number[]][] = [
    ['DEL (plain)', [0x7f]],
    ['escape \\n', [0x5c, 0x6e]],
    ['escape \\u00e9', [...Buffer.from('\\u00e9')]],
    ['escaped quote', [0x5c, 0x22]],
    ['é', [0xc3, 0xa9]],
    ['東京', [...Buffer.from('東京')]],
    ['🚀', [0xf0, 0x9f, 0x9a, 0x80]],
    ['a run of non-ASCII with an escape', [...Buffer.from('ééé東京🚀\\té€')]],
    ['control 0x00', [0x00]],
    ['control 0x1f', [0x1f]],
    ['invalid escape', [0x5c, 0x78]],
    ['lone continuation', [0x80]],
    ['overlong', [0xc0, 0xaf]],
    ['surrogate', [0xed, 0xa0, 0x80]],
    ['truncated sequence', [0xe2, 0x82, 0x41]],
    ['byte 0xff', [0xff]],
  ];

  it.each(specials)(
    '%s at every lane and byte offset: the verdict, error and offset of scanJson',
    (_, bytes) => {
      for (let before = 0; before < 12; before++) {
        const text = Buffer.concat([
          Buffer.from(`{"tags":["${'a'.repeat(before)}`),
          Buffer.from(bytes),
          Buffer.from(`${'b'.repeat(13)}", "x"]}`),
        ]);
        const expected = scanJson(text, new KeyNames(['tags']), noopHandler, Number.POSITIVE_INFINITY);
        const whole = scan(text, [], 0);
        expect(whole.status).toBe(expected === undefined ? SCAN_OK : SCAN_INVALID);
        expect(whole.error).toEqual(expected);
        for (let offset = 0; offset < 4; offset++) {
          for (let cut = 0; cut <= text.length; cut++) {
            const split = scan(text, [cut], offset);
            if (split.status !== whole.status || split.error?.offset !== whole.error?.offset)
              expect.fail(
                `${before} bytes before, offset ${offset}, cut at ${cut}: ${JSON.stringify(split.error)}`,
              );
            expect(split).toEqual(whole);
          }
        }
      }
    },
  );

  it('checks UTF-8 sequence by sequence in a chunk that is not valid UTF-8 elsewhere', () => {
    // The first string is valid (and long), the second one is not: the error is at its first byte.
    const text = Buffer.concat([
      Buffer.from(`["${'é'.repeat(40)}", "ab`),
      Buffer.from([0xf5]),
      Buffer.from('"]'),
    ]);
    const result = scan(text, [], 1);
    expect(result.error).toEqual({ offset: text.length - 3, message: 'invalid UTF-8 in string' });
    expect(scan(Buffer.from(`["${'é'.repeat(40)}"]`), [], 3).status).toBe(SCAN_OK);
  });

  it('finishes a sequence cut by the chunk end in the next chunk, with word-aligned and unaligned cuts', () => {
    const text = Buffer.from(`["${'🚀é'.repeat(30)}"]`);
    for (let cut = 1; cut < text.length; cut++)
      for (let offset = 0; offset < 4; offset++)
        expect(scan(text, [cut, cut + 1], offset).status).toBe(SCAN_OK);
  });
});

const noopHandler: ScanHandler = { onKey() {}, onValue() {}, onObjectEnd() {} };

/** Scans `text` cut at `cuts` (ascending), recording events, status and error. */
function scanCut(text: Buffer, cuts: readonly number[], names: KeyNames = new KeyNames(['tags'])) {
  const events: string[] = [];
  const handler: StreamScanHandler = {
    onMember: (depth, name, start) => events.push(`member ${depth} ${name} ${start}`) > 0,
    onValue: (depth, end) => events.push(`value ${depth} ${end}`) > 0,
    onObjectEnd: (depth, close) => events.push(`end ${depth} ${close}`) > 0,
  };
  const scanner = new JsonStreamScanner(names, MAX_SCAN_NESTING);
  let status: number = SCAN_OK;
  let from = 0;
  for (const cut of [...cuts, text.length]) {
    status = scanner.write(text.subarray(from, cut), handler);
    from = cut;
    if (status !== SCAN_OK) break;
  }
  if (status === SCAN_OK) status = scanner.end();
  return { status, error: scanner.error, events };
}

describe('JsonStreamScanner — onLoneMember', () => {
  /** As {@link scanCut}, with a handler that has `onLoneMember`: each such call recorded as its three events. */
  function scanLone(text: Buffer, cuts: readonly number[]) {
    const events: string[] = [];
    let lone = 0;
    const handler: StreamScanHandler = {
      onMember: (depth, name, start) => events.push(`member ${depth} ${name} ${start}`) > 0,
      onValue: (depth, end) => events.push(`value ${depth} ${end}`) > 0,
      onObjectEnd: (depth, close) => events.push(`end ${depth} ${close}`) > 0,
      onLoneMember: (depth, name, start, end, close) => {
        lone++;
        return (
          events.push(`member ${depth} ${name} ${start}`, `value ${depth} ${end}`, `end ${depth} ${close}`) >
          0
        );
      },
    };
    const scanner = new JsonStreamScanner(new KeyNames(['tags']), MAX_SCAN_NESTING);
    let from = 0;
    for (const cut of [...cuts, text.length]) {
      expect(scanner.write(text.subarray(from, cut), handler)).toBe(SCAN_OK);
      from = cut;
    }
    expect(scanner.end()).toBe(SCAN_OK);
    return { events, lone };
  }

  it.each([
    ['{"tags":1}', 1],
    ['[{"tags":{"tags":1}},{"x":1,"tags":[2],"y":3}]', 2],
    ['{"tags":1,"tags":2}', 1],
    ['{"a":{"tags":1},"tags":{"b":2}}', 2],
    ['{"tags":{"x":{"tags":1}}}', 1],
  ])('%s: the events the three calls get, in order, at every cut', (text, lone) => {
    const bytes = Buffer.from(text);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const expected = scanCut(bytes, [cut]).events;
      const got = scanLone(bytes, [cut]);
      expect(got.events).toEqual(expected);
      if (cut === 0 || cut === bytes.length) expect(got.lone).toBe(lone);
    }
  });

  it('across windows and full event buffers', () => {
    const text = Buffer.from(`[${Array.from({ length: 20_000 }, (_, k) => `{"tags":${k}}`).join(',')}]`);
    const cuts = [1, 65536, 65537, 100_000, 200_001];
    const got = scanLone(text, cuts);
    expect(got.events).toEqual(scanCut(text, cuts).events);
    expect(got.lone).toBeGreaterThan(19_000);
  });
});

describe('JsonStreamScanner — the same error wherever the text is cut', () => {
  it.each(ERRORS)('%j, cut anywhere and byte by byte', (text) => {
    const bytes = Buffer.from(text);
    const whole = scanCut(bytes, []);
    expect(whole.status).toBe(SCAN_INVALID);
    for (let cut = 0; cut <= bytes.length; cut++) expect(scanCut(bytes, [cut])).toEqual(whole);
    expect(
      scanCut(
        bytes,
        Array.from({ length: bytes.length }, (_, k) => k),
      ),
    ).toEqual(whole);
  });
});

describe('JsonStreamScanner — windows, turns and limits of the WebAssembly scanner', () => {
  /** `[{"tags":k},…]`: three events per object; 200 KB of them, more than a 64 KiB window's events. */
  const manyObjects = (count: number) =>
    Buffer.from(`[${Array.from({ length: count }, (_, k) => `{"tags":${k}}`).join(',')}]`);

  it('reports every member of a chunk larger than a window, with more events than fit at once', () => {
    const text = manyObjects(20_000);
    expect(text.length).toBeGreaterThan(3 * 65536);
    const whole = scanCut(text, []);
    expect(whole.status).toBe(SCAN_OK);
    expect(whole.events).toHaveLength(60_000);
    // The last object: `{"tags":19999}` just before the final `]`.
    const close = text.length - 2;
    expect(whole.events.slice(-3)).toEqual([`member 2 0 ${close - 5}`, `value 2 ${close}`, `end 2 ${close}`]);
    expect(scanCut(text, [65535, 65536, 65537, 131072, 131073])).toEqual(whole);
  });

  it('keeps each scanner’s state when scanners take turns, deep nesting and cut keys included', () => {
    const texts = [
      Buffer.from(`${'[{"tags":'.repeat(3000)}1${'}]'.repeat(3000)}`),
      Buffer.from('{"t\\u0061gs":{"x":"y","tags":[1,2]},"tags":null}'),
      manyObjects(100),
      Buffer.from('[1, {"tags": tru'),
    ];
    const alone = texts.map((text) => scanCut(text, []));
    const scanners = texts.map(() => new JsonStreamScanner(new KeyNames(['tags']), MAX_SCAN_NESTING));
    const events = texts.map((): string[] => []);
    const handlers = events.map(
      (list): StreamScanHandler => ({
        onMember: (depth, name, start) => list.push(`member ${depth} ${name} ${start}`) > 0,
        onValue: (depth, end) => list.push(`value ${depth} ${end}`) > 0,
        onObjectEnd: (depth, close) => list.push(`end ${depth} ${close}`) > 0,
      }),
    );
    const status = texts.map((): number => SCAN_OK);
    // Seven bytes at a time, round robin: every key and every level is cut somewhere.
    const longest = Math.max(...texts.map((t) => t.length));
    for (let at = 0; at < longest; at += 7) {
      texts.forEach((text, k) => {
        if (at < text.length && status[k] === SCAN_OK)
          status[k] = scanners[k]!.write(text.subarray(at, at + 7), handlers[k]!);
      });
    }
    texts.forEach((_, k) => {
      if (status[k] === SCAN_OK) status[k] = scanners[k]!.end();
      expect({ status: status[k], error: scanners[k]!.error, events: events[k] }).toEqual(alone[k]);
    });
  });

  it('lets a handler run another scanner in the middle of a chunk', () => {
    const outer = manyObjects(5000);
    const inner = Buffer.from('{"tags":{"tags":[{"tags":1}]}}');
    const expected = scanCut(inner, []);
    const innerEvents: string[] = [];
    let runs = 0;
    const nested = (): boolean => {
      runs++;
      innerEvents.length = 0;
      const scanner = new JsonStreamScanner(new KeyNames(['tags']), 10);
      const list = innerEvents;
      const handler: StreamScanHandler = {
        onMember: (depth, name, start) => list.push(`member ${depth} ${name} ${start}`) > 0,
        onValue: (depth, end) => list.push(`value ${depth} ${end}`) > 0,
        onObjectEnd: (depth, close) => list.push(`end ${depth} ${close}`) > 0,
      };
      expect(scanner.write(inner, handler)).toBe(SCAN_OK);
      expect(scanner.end()).toBe(SCAN_OK);
      expect(innerEvents).toEqual(expected.events);
      return true;
    };
    const events: string[] = [];
    const scanner = new JsonStreamScanner(new KeyNames(['x', 'tags']), 10);
    const status = scanner.write(outer, {
      onMember: (depth, name, start) => nested() && events.push(`member ${depth} ${name} ${start}`) > 0,
      onValue: (depth, end) => events.push(`value ${depth} ${end}`) > 0,
      onObjectEnd: (depth, close) => nested() && events.push(`end ${depth} ${close}`) > 0,
    });
    expect(status).toBe(SCAN_OK);
    expect(scanner.end()).toBe(SCAN_OK);
    expect(runs).toBe(10_000);
    expect(events).toEqual(scanCut(outer, [], new KeyNames(['x', 'tags'])).events);
  });

  it(`accepts ${MAX_SCAN_NESTING} levels of nesting and rejects one more`, () => {
    const deepest = Buffer.from(`${'['.repeat(MAX_SCAN_NESTING)}${']'.repeat(MAX_SCAN_NESTING)}`);
    expect(errorOf(deepest)).toBeUndefined();
    const deeper = Buffer.from(`${'['.repeat(MAX_SCAN_NESTING + 1)}${']'.repeat(MAX_SCAN_NESTING + 1)}`);
    expect(errorOf(deeper)).toEqual({
      offset: MAX_SCAN_NESTING,
      message: `nesting deeper than ${MAX_SCAN_NESTING} levels`,
    });
  });

  it('scans a key longer than 2 GiB cut by chunks (the kept length overflowed: the scanner trapped)', () => {
    // json-scan.c counted every byte of a cut key in an int32: past 2^31 it went negative and the
    // next window's bytes were written before key_bytes (a WebAssembly trap, SCAN_FAILED at 2^31 + 2).
    const scanner = new JsonStreamScanner(new KeyNames(['tags']), 10);
    const events: string[] = [];
    const handler: StreamScanHandler = {
      onMember: (depth, name, start) => events.push(`member ${depth} ${name} ${start}`) > 0,
      onValue: (depth, end) => events.push(`value ${depth} ${end}`) > 0,
      onObjectEnd: (depth, close) => events.push(`end ${depth} ${close}`) > 0,
    };
    expect(scanner.write(Buffer.from('{"'), handler)).toBe(SCAN_OK);
    const chunk = Buffer.alloc(64 * 1024 * 1024, 'a');
    const chunks = 2 ** 31 / chunk.length + 1;
    for (let k = 0; k < chunks; k++) expect(scanner.write(chunk, handler)).toBe(SCAN_OK);
    expect(scanner.write(Buffer.from('":1,"tags":2}'), handler)).toBe(SCAN_OK);
    expect(scanner.end()).toBe(SCAN_OK);
    expect(scanner.error).toBeUndefined();
    const at = 2 + chunks * chunk.length;
    expect(events).toEqual([`member 1 0 ${at + 11}`, `value 1 ${at + 12}`, `end 1 ${at + 12}`]);
  });

  it(`holds ${MAX_KEY_NAMES} names of up to ${MAX_KEY_NAME_BYTES} bytes, matched raw and escaped`, () => {
    const longest = 'n'.repeat(MAX_KEY_NAME_BYTES - 1) + 'z';
    const list = [...Array.from({ length: MAX_KEY_NAMES - 1 }, (_, k) => `name${k}`), longest];
    const names = new KeyNames(list);
    const escaped = [...longest].map((c) => `\\u00${c.charCodeAt(0).toString(16)}`).join('');
    const text = Buffer.from(`{"${longest}":1,"name254":2,"${escaped}":3,"${longest}x":4}`);
    const whole = scanCut(text, [], names);
    expect(whole.events.filter((e) => e.startsWith('member'))).toHaveLength(3);
    expect(whole.events[0]).toMatch(/^member 1 255 /);
    expect(whole.events[2]).toMatch(/^member 1 254 /);
    expect(whole.events[4]).toMatch(/^member 1 255 /);
    expect(
      scanCut(
        text,
        Array.from({ length: text.length }, (_, k) => k),
        names,
      ),
    ).toEqual(whole);
    expect(() => new KeyNames([...list, 'one more'])).toThrow(/at most/);
    expect(() => new KeyNames(['x'.repeat(MAX_KEY_NAME_BYTES + 1)])).toThrow(/at most/);
    // 65 names of the longest length: 16,640 bytes together, over 16,384.
    const many = Array.from({ length: 65 }, (_, k) => String(k).padEnd(MAX_KEY_NAME_BYTES, 'x'));
    expect(() => new KeyNames(many.slice(0, 64))).not.toThrow();
    expect(() => new KeyNames(many)).toThrow('key names are at most 16384 bytes together');
  });
});

describe('JsonStreamScanner — the compact path (no whitespace between tokens) against the byte-by-byte states', () => {
  // A text without whitespace goes through json-scan.c's `walk`, whose strings come from 64-byte blocks of
  // string stops; cut into one-byte chunks, the same text goes through the states alone (`walk` hands
  // over at every window end). Shifting the text by 0–63 bytes of leading whitespace moves every token
  // across a block edge once.
  const names = new KeyNames(['tags', 'metadata']);
  const everyByte = (text: Buffer) => Array.from({ length: text.length }, (_, k) => k);
  const shifted = (shift: number, text: string | Buffer) =>
    Buffer.concat([Buffer.alloc(shift, 0x20), Buffer.isBuffer(text) ? text : Buffer.from(text)]);

  /** One record with every shape `walk` takes: names, string, number and literal values, nesting, UTF-8. */
  const record = (k: number) =>
    `{"uuid":"c1000000-0000-4000-8000-${String(k).padStart(12, '0')}","tags":[{"n":"é東🚀","v":-${k}.5e+3},` +
    `{"n":"a\\"b\\u00e9","v":0}],"metadata":{"a":true,"b":false,"c":null,"d":[],"e":{}},"x":[1,"y",[{}]],"z":{"tags":7}}`;
  const list = `[${Array.from({ length: 12 }, (_, k) => record(k)).join(',')}]`;

  it('reports the same members at every block offset as the states do', () => {
    for (let shift = 0; shift < 64; shift++) {
      const text = shifted(shift, list);
      const whole = scanCut(text, [], names);
      expect(whole.status).toBe(SCAN_OK);
      // Per record: `tags` (member, value, end of its object), `metadata` (member, value), then the
      // last member of `z`, `tags` (member, value before its `}`, end).
      expect(whole.events).toHaveLength(12 * 8);
      expect(whole.events[0]).toBe(`member 2 0 ${shift + list.indexOf('"tags":') + 7}`);
      expect(scanCut(text, everyByte(text), names)).toEqual(whole);
    }
  });

  it.each([
    ['{"a":"b"x}', 8, /expected ',' or '}' but found 'x'/],
    ['{"a":"b\u0001"}', 7, /unescaped control character/],
    ['{"a":"b\\q"}', 7, /invalid escape sequence/],
    ['{"a":tru}', 5, /expected a JSON value but found 't'/],
    ['{"a":nul}', 5, /expected a JSON value but found 'n'/],
    ['{"a":fals}', 5, /expected a JSON value but found 'f'/],
    ['{"a":-}', 6, /expected a digit/],
    ['{"a":1.}', 7, /expected a digit after '\.'/],
    ['{"a":[1,]}', 8, /expected a JSON value but found '\]'/],
    ['{"a":{"b":1]}', 11, /expected ',' or '}' but found '\]'/],
    ['{"tags":"x"]', 11, /expected ',' or '}' but found '\]'/],
    ['{"tags"1}', 7, /expected ':' after the key but found '1'/],
    ['{"a":"b","c"}', 12, /expected ':' after the key but found '}'/],
    ['{"a":"b",1}', 9, /expected a string key but found '1'/],
    ['[{"a":"b"}]]', 11, /unexpected '\]' after the JSON value/],
  ])('rejects %j at the same byte at every block offset', (text, offset, message) => {
    for (let shift = 0; shift < 64; shift++) {
      const bytes = shifted(shift, text);
      const whole = scanCut(bytes, [], names);
      expect(whole.status).toBe(SCAN_INVALID);
      expect(whole.error?.offset).toBe(shift + offset);
      expect(whole.error?.message).toMatch(message);
      expect(scanCut(bytes, everyByte(bytes), names)).toEqual(whole);
    }
  });

  it('checks multi-byte characters that straddle a block edge, valid and not', () => {
    // 2-, 3- and 4-byte sequences across every offset of a block edge; then one invalid sequence
    // (a surrogate, an overlong form, a lone continuation byte, a truncated sequence) at each offset.
    const valid = Buffer.from(`{"k":"${'é東🚀'.repeat(12)}"}`);
    const invalid: number[][] = [
      [0xed, 0xa0, 0x80], // a surrogate
      [0xc0, 0xaf], // an overlong form
      [0x80], // a lone continuation byte
      [0xe6, 0x9d], // a truncated sequence
    ];
    for (let shift = 0; shift < 64; shift++) {
      const text = shifted(shift, valid);
      const whole = scanCut(text, [], names);
      expect(whole.status).toBe(SCAN_OK);
      expect(scanCut(text, everyByte(text), names)).toEqual(whole);
      for (const sequence of invalid) {
        const bad = shifted(
          shift,
          Buffer.from([...Buffer.from('{"k":"ab'), ...sequence, ...Buffer.from('cd"}')]),
        );
        const result = scanCut(bad, [], names);
        expect(result.status).toBe(SCAN_INVALID);
        expect(result.error?.offset).toBe(shift + 8);
        expect(result.error?.message).toMatch(/invalid UTF-8/);
        expect(scanCut(bad, everyByte(bad), names)).toEqual(result);
      }
    }
  });
});

describe('a failure of the scanner itself (a WebAssembly trap) is not invalid JSON', () => {
  const none: StreamScanHandler = { onMember: () => true, onValue: () => true, onObjectEnd: () => true };

  it('is SCAN_FAILED with the trap as `failure`; the next scanner runs on a fresh instance', () => {
    const trap = new Error('unreachable');
    injectScanFailure(trap);
    const scanner = new JsonStreamScanner(new KeyNames(['tags']), MAX_SCAN_NESTING);
    expect(scanner.write(Buffer.from('{"tags":1}'), none)).toBe(SCAN_FAILED);
    expect(scanner.error).toEqual({
      offset: 0,
      message: 'the JSON scanner failed: unreachable',
      failure: trap,
    });
    // Spent: later chunks are ignored.
    expect(scanner.write(Buffer.from('}'), none)).toBe(SCAN_OK);
    expect(record('{"tags":1}', ['tags']).events).toEqual(['key 1 tags 1-7', 'value 1 9', 'end 1 9']);
  });

  /**
   * A scanner waiting with 60,000 open levels — more than the ~35,000 a fresh instance holds before its
   * memory grows — after a trap in another scanner gave the instance up: its next turn restores it into
   * a fresh instance, whose memory must grow first.
   */
  const deepScannerAfterTrap = () => {
    const levels = 60_000;
    const deep = new JsonStreamScanner(new KeyNames(['tags']), MAX_SCAN_NESTING);
    expect(deep.write(Buffer.from('['.repeat(levels)), none)).toBe(SCAN_OK);
    injectScanFailure(new Error('unreachable'));
    const other = new JsonStreamScanner(new KeyNames(['tags']), MAX_SCAN_NESTING);
    expect(other.write(Buffer.from('[1]'), none)).toBe(SCAN_FAILED);
    return { deep, levels };
  };

  it('leaves a waiting scanner deeper than a fresh instance’s memory its state (it threw a RangeError)', () => {
    const { deep, levels } = deepScannerAfterTrap();
    // The next turn restores the deep scanner into the fresh instance.
    expect(deep.write(Buffer.from(`${']'.repeat(levels - 1)}}`), none)).toBe(SCAN_INVALID);
    expect(deep.error).toEqual({ offset: 2 * levels - 1, message: "expected ',' or ']' but found '}'" });
  });

  it.each(['write', 'end'] as const)(
    'is SCAN_FAILED, not a throw, when the memory for a waiting deep scanner cannot grow (%s)',
    (call) => {
      // A throw here left the response patch's write, and ended the process from a 'data' listener.
      const { deep, levels } = deepScannerAfterTrap();
      const refused = new RangeError('WebAssembly.Memory.grow(): Maximum memory size exceeded');
      const grow = refuseNextMemoryGrow(refused);
      try {
        expect(call === 'write' ? deep.write(Buffer.from(']'), none) : deep.end()).toBe(SCAN_FAILED);
        expect(grow).toHaveBeenCalledTimes(1);
      } finally {
        grow.mockRestore();
      }
      expect(deep.error).toEqual({
        offset: levels,
        message: `the JSON scanner failed: ${refused.message}`,
        failure: refused,
      });
      // The instance is unharmed: the next scanner runs on it.
      expect(record('{"tags":1}', ['tags']).events).toEqual(['key 1 tags 1-7', 'value 1 9', 'end 1 9']);
    },
  );

  it('scanJson reports it with `failure`, which no invalid text has', () => {
    const trap = new Error('out of memory');
    injectScanFailure(trap);
    expect(errorOf('{}')?.failure).toBe(trap);
    expect(errorOf('{')?.failure).toBeUndefined();
  });
});
