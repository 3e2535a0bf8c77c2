/**
 * The space-saving heavy-hitters table (issue 11 item 1): bounded memory whatever the number of
 * consumers, the heavy hitters found under a skewed stream, bounded detail lists.
 */
import { describe, expect, it } from 'vitest';
import { MAX_DETAIL_VALUES, type UsageEvent, UsageTable } from '../../../src/aliases/usage-table.ts';
import { random } from './helpers.ts';

const event = (consumer: string, at = 0, extra: Partial<UsageEvent> = {}): UsageEvent => ({
  consumer,
  aliases: ['tags'],
  clientVersion: '0.59.0',
  userAgent: 'cli/0.59.0',
  at,
  ...extra,
});

describe('UsageTable', () => {
  it('counts exactly while it has room', () => {
    const table = new UsageTable(10);
    for (const c of ['a', 'b', 'a', 'c', 'a', 'b']) table.record(event(c));
    expect(table.top().map((u) => [u.consumer, u.count, u.error])).toEqual([
      ['a', 3, 0],
      ['b', 2, 0],
      ['c', 1, 0],
    ]);
    expect(table.recorded).toBe(6);
  });

  it('keeps memory bounded by its capacity with 100,000 distinct consumers', () => {
    const table = new UsageTable(1000);
    for (let i = 0; i < 100_000; i++) table.record(event(`consumer-${i}`, i));
    expect(table.size).toBe(1000);
    expect(table.top()).toHaveLength(1000);
    expect(table.recorded).toBe(100_000);
    // Space-saving invariant: the counts sum to the number of recorded requests.
    expect(table.top().reduce((n, u) => n + u.count, 0)).toBe(100_000);
  });

  it('finds the heavy hitters of a skewed stream among 100,000 one-off consumers', () => {
    const table = new UsageTable(1000);
    const next = random(42);
    const heavy = Array.from({ length: 10 }, (_, k) => `heavy-${k}`);
    const truth = new Map<string, number>();
    let oneOff = 0;
    // ~180,000 requests: 100,000 from distinct one-off consumers, the rest from 10 heavy ones
    // (heavy-0 the heaviest, each about 2.5 % to 7 % of the stream: far above N / capacity).
    while (oneOff < 100_000) {
      let consumer: string;
      if (next() < 0.45) {
        const k = Math.floor(next() ** 2 * heavy.length);
        consumer = heavy[k]!;
      } else consumer = `one-off-${oneOff++}`;
      truth.set(consumer, (truth.get(consumer) ?? 0) + 1);
      table.record(event(consumer));
    }
    const top = table.top(10);
    expect(new Set(top.map((u) => u.consumer))).toEqual(new Set(heavy));
    for (const u of top) {
      const real = truth.get(u.consumer)!;
      // The estimate never understates and overstates by at most `error`.
      expect(u.count).toBeGreaterThanOrEqual(real);
      expect(u.count - u.error).toBeLessThanOrEqual(real);
    }
    // Sorted by count, highest first.
    expect(top.map((u) => u.count)).toEqual([...top.map((u) => u.count)].sort((a, b) => b - a));
    expect(top[0]!.consumer).toBe('heavy-0');
  });

  it('bounds the per-consumer lists of client versions and user agents, most recent last', () => {
    const table = new UsageTable(2);
    for (let i = 0; i < 50; i++) {
      table.record(event('a', i, { clientVersion: `0.${i}.0`, userAgent: `ua/${i}` }));
    }
    table.record(event('a', 99, { clientVersion: '0.45.0' }));
    const [a] = table.top();
    expect(a!.clientVersions).toHaveLength(MAX_DETAIL_VALUES);
    expect(a!.clientVersions.at(-1)).toBe('0.45.0');
    expect(a!.clientVersions).not.toContain('0.0.0');
    expect(a!.userAgents).toHaveLength(MAX_DETAIL_VALUES);
  });

  it('counts aliases per consumer, also those added later to the same request', () => {
    const table = new UsageTable(5);
    table.record(event('a', 1, { aliases: ['tags'] }));
    table.addAliases('a', ['ignoreTags']);
    table.record(event('a', 2, { aliases: ['tags', 'tagTypeUUID'] }));
    table.addAliases('unknown', ['tags']);
    expect(table.top()).toEqual([
      {
        consumer: 'a',
        count: 2,
        error: 0,
        aliases: { tags: 2, ignoreTags: 1, tagTypeUUID: 1 },
        clientVersions: ['0.59.0'],
        userAgents: ['cli/0.59.0'],
        firstSeen: '1970-01-01T00:00:00.001Z',
        lastSeen: '1970-01-01T00:00:00.002Z',
      },
    ]);
  });

  it('replaces the smallest consumer and marks the inherited count as error', () => {
    const table = new UsageTable(2);
    table.record(event('a'));
    table.record(event('a'));
    table.record(event('b'));
    table.record(event('c'));
    expect(table.top().map((u) => [u.consumer, u.count, u.error])).toEqual([
      ['a', 2, 0],
      ['c', 2, 1],
    ]);
  });

  it('resets', () => {
    const table = new UsageTable(2);
    table.record(event('a'));
    table.reset();
    expect(table.top()).toEqual([]);
    expect(table.size).toBe(0);
    expect(table.recorded).toBe(0);
    table.record(event('b'));
    expect(table.top().map((u) => u.consumer)).toEqual(['b']);
  });

  it('selects the few heaviest in the order a full sort gives, ties included (ranking)', () => {
    const table = new UsageTable(300);
    const next = random(7);
    // Many ties on count and error (evictions), broken by recency; some on all three.
    for (let i = 0; i < 5_000; i++) table.record(event(`c-${Math.floor(next() ** 3 * 900)}`, i >> 2));
    const sorted = table.ranking().slice(0, 300);
    // The full listing itself, against the rule rather than against the code under test: every consumer
    // once, the higher count first, then the smaller error, then the most recent.
    expect(new Set(sorted.map((u) => u.consumer)).size).toBe(300);
    for (let i = 1; i < sorted.length; i++) {
      const [a, b] = [sorted[i - 1]!, sorted[i]!];
      const order = b.count - a.count || a.error - b.error || b.lastSeen.localeCompare(a.lastSeen);
      expect(order, `${a.consumer} before ${b.consumer}`).toBeLessThanOrEqual(0);
    }
    for (const limit of [0, 1, 10, 63, 64, 65, 299, 300, 301]) {
      expect(table.top(limit)).toEqual(sorted.slice(0, limit));
      const ranking = table.ranking(limit);
      expect(ranking.length).toBe(Math.min(limit, 300));
      expect([...ranking.slice(0, 5), ...ranking.slice(5, ranking.length)]).toEqual(sorted.slice(0, limit));
    }
    expect(table.top(-1)).toEqual([]);
    expect(table.top(2.5)).toEqual(sorted.slice(0, 2));
  });

  it('keeps the order and counts a listing had at the call while records are made during its reading', () => {
    const table = new UsageTable(3);
    table.record(event('a', 1));
    table.record(event('a', 2));
    table.record(event('b', 3));
    const listing = table.ranking();
    table.record(event('b', 4));
    table.record(event('b', 5, { clientVersion: '0.58.0' }));
    const [a, b] = listing.slice(0, 2);
    expect([a!.consumer, a!.count, b!.consumer, b!.count]).toEqual(['a', 2, 'b', 1]);
    expect(b!.lastSeen).toBe('1970-01-01T00:00:00.003Z');
    expect(b!.clientVersions).toEqual(['0.59.0', '0.58.0']); // details as of the slice
  });

  it('ranks for the gauge by the guaranteed count: a one-off consumer never outranks a real one (guaranteed)', () => {
    const table = new UsageTable(3);
    let at = 0;
    for (let i = 0; i < 8; i++) table.record(event('a', at++));
    for (let i = 0; i < 3; i++) table.record(event('b', at++));
    for (let i = 1; i <= 4; i++) table.record(event(`once-${i}`, at++));
    // By the estimate, the last one-off (its count inherited from three evictions) outranks b…
    expect(table.top(2).map((u) => [u.consumer, u.count, u.error])).toEqual([
      ['a', 8, 0],
      ['once-4', 4, 3],
    ]);
    // … by what is certain (count − error), b does, and the one-off counts 1.
    expect(table.guaranteed(3)).toEqual([
      { consumer: 'a', count: 8 },
      { consumer: 'b', count: 3 },
      { consumer: 'once-4', count: 1 },
    ]);
    expect(table.guaranteed(1)).toEqual([{ consumer: 'a', count: 8 }]);
    expect(table.guaranteed(0)).toEqual([]);
  });

  it('guaranteed gives the full listing’s lower bounds, highest first, ties the most recent first', () => {
    const table = new UsageTable(200);
    const next = random(11);
    for (let i = 0; i < 5_000; i++) table.record(event(`c-${Math.floor(next() ** 3 * 700)}`, i >> 2));
    const expected = table
      .top()
      .map((u) => ({ consumer: u.consumer, count: u.count - u.error, lastSeen: u.lastSeen }))
      .sort((x, y) => y.count - x.count || y.lastSeen.localeCompare(x.lastSeen));
    for (const limit of [1, 10, 64, 200, 201]) {
      const guaranteed = table.guaranteed(limit);
      expect(guaranteed.map((c) => c.count)).toEqual(expected.slice(0, limit).map((c) => c.count));
      // The same consumers, but for ties at the cut made the same instant.
      for (const c of guaranteed)
        expect(expected.find((e) => e.consumer === c.consumer)?.count).toBe(c.count);
    }
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new UsageTable(0)).toThrow(RangeError);
    expect(() => new UsageTable(1.5)).toThrow(RangeError);
  });
});
