/**
 * A bounded heavy-hitters table of alias consumers (issue 11 item 1): the space-saving algorithm
 * (Metwally, Agrawal, El Abbadi, "Efficient Computation of Frequent and Top-k Elements in Data
 * Streams", ICDT 2005). At most `capacity` consumers are tracked; when a new one arrives in a full table
 * it replaces the consumer with the smallest count and inherits that count (+1), which it may
 * overstate by at most `error`. Every consumer whose true count exceeds N / capacity (N = all recorded
 * requests) is guaranteed to be in the table. Pure: no clock, no I/O; O(log capacity) per record.
 */

/** One aliased request, as the layer records it. */
export interface UsageEvent {
  /** Sanitised consumer id (see `consumer.ts`). */
  consumer: string;
  /** Aliases the request used (names from the alias table). */
  aliases: readonly string[];
  /** Full client version, e.g. `0.59.0` (bounded by the caller). */
  clientVersion: string;
  /** User-Agent product token, e.g. `kleinkram-cli/0.59.0`. */
  userAgent: string;
  /** When, ms since the epoch. */
  at: number;
}

/** One consumer in the report of `GET /aliases/usage`. */
export interface ConsumerUsage {
  consumer: string;
  /** Requests that used an alias (space-saving estimate: true count is in `[count - error, count]`). */
  count: number;
  /** Largest possible overstatement of `count` (0 while the table never evicted for this consumer). */
  error: number;
  /** Uses per alias, since this consumer entered the table. */
  aliases: Record<string, number>;
  /** Distinct client versions seen, most recent last, at most {@link MAX_DETAIL_VALUES}. */
  clientVersions: string[];
  /** Distinct User-Agent product tokens seen, most recent last, at most {@link MAX_DETAIL_VALUES}. */
  userAgents: string[];
  /** ISO 8601 instants. */
  firstSeen: string;
  lastSeen: string;
}

/** A ranked listing of the table, read in slices ({@link UsageTable.ranking}). */
export interface UsageRanking {
  /** Consumers listed. */
  readonly length: number;
  /** Descriptions of the consumers ranked `from` (inclusive) to `to` (exclusive), as `Array.slice`. */
  slice(from: number, to: number): ConsumerUsage[];
}

/** Distinct client versions / user agents kept per consumer (the oldest is dropped first). */
export const MAX_DETAIL_VALUES = 10;
/** Distinct aliases kept per consumer (the alias table has fewer). */
const MAX_ALIASES_PER_CONSUMER = 32;

interface Entry {
  consumer: string;
  count: number;
  error: number;
  aliases: Map<string, number>;
  clientVersions: string[];
  userAgents: string[];
  firstSeen: number;
  lastSeen: number;
  /** Position in the min-heap. */
  index: number;
}

/** A consumer as ranked: its entry and the figures its place was decided by. */
interface Ranked {
  entry: Entry;
  count: number;
  error: number;
  lastSeen: number;
}

/** Listings of at most this many consumers are selected in one pass instead of sorting the table. */
const SELECT_BELOW = 64;

/** The figures of an entry at this moment. */
function snapshot(entry: Entry): Ranked {
  return { entry, count: entry.count, error: entry.error, lastSeen: entry.lastSeen };
}

/** Ranking order: the higher count first, then the smaller error, then the most recent. */
function rankOrder(
  a: Pick<Ranked, 'count' | 'error' | 'lastSeen'>,
  b: Pick<Ranked, 'count' | 'error' | 'lastSeen'>,
): number {
  return b.count - a.count || a.error - b.error || b.lastSeen - a.lastSeen;
}

/**
 * One step of a selection of the `limit` highest in one pass, without sorting what is scanned: puts a
 * candidate into `kept` (highest first) after every kept value it does not outrank, and drops the lowest
 * beyond `limit`. Ties keep the first seen. Used by {@link UsageTable.ranking} and
 * {@link UsageTable.guaranteed}: the few heaviest of the whole table at every scrape.
 * @param kept The values kept so far, highest first (modified).
 * @param limit Most values kept, at least 1.
 * @param outranks Whether the candidate goes before this kept value.
 * @param make The candidate's kept value, built only when it is kept.
 */
function keepHighest<K>(kept: K[], limit: number, outranks: (other: K) => boolean, make: () => K): void {
  if (kept.length >= limit && !outranks(kept[kept.length - 1]!)) return;
  let at = kept.length;
  while (at > 0 && outranks(kept[at - 1]!)) at--;
  kept.splice(at, 0, make());
  if (kept.length > limit) kept.pop();
}

function remember(list: string[], value: string): void {
  const at = list.indexOf(value);
  if (at === list.length - 1 && at >= 0) return;
  if (at >= 0) list.splice(at, 1);
  list.push(value);
  if (list.length > MAX_DETAIL_VALUES) list.shift();
}

/**
 * The space-saving table.
 * @example
 * const table = new UsageTable(1000);
 * table.record({ consumer: 'team-a', aliases: ['tags'], clientVersion: '0.59.0', userAgent: 'cli/0.59.0', at: Date.now() });
 * table.top(10); // [{ consumer: 'team-a', count: 1, … }]
 */
export class UsageTable {
  /** Most consumers tracked. */
  readonly capacity: number;
  private readonly byConsumer = new Map<string, Entry>();
  /** Min-heap on count: the root is the consumer the next newcomer replaces. */
  private readonly heap: Entry[] = [];
  private total = 0;

  /**
   * An empty table.
   * @param capacity Most consumers tracked (`CONSUMER_TABLE_SIZE`), a positive integer.
   * @throws {RangeError} for a capacity that is not a positive integer.
   */
  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError('capacity must be a positive integer');
    this.capacity = capacity;
  }

  /** Consumers tracked now (never more than {@link capacity}). */
  get size(): number {
    return this.byConsumer.size;
  }

  /** Requests recorded since the last {@link reset}. */
  get recorded(): number {
    return this.total;
  }

  /**
   * Counts one aliased request; when the table is full, the newcomer replaces the consumer with the
   * smallest count and inherits it (space-saving).
   * @param event The consumer, its aliases, client version, User-Agent token and time (`at`, ms since
   *   the epoch).
   * @throws Nothing.
   */
  record(event: UsageEvent): void {
    this.total++;
    let entry = this.byConsumer.get(event.consumer);
    if (entry !== undefined) {
      entry.count++;
      this.siftDown(entry.index);
    } else if (this.heap.length < this.capacity) {
      entry = this.fresh(event, 1, 0);
      entry.index = this.heap.length;
      this.heap.push(entry);
      this.byConsumer.set(event.consumer, entry);
      this.siftUp(entry.index);
    } else {
      // Space-saving: the newcomer takes the place (and the count) of the smallest.
      const evicted = this.heap[0]!;
      this.byConsumer.delete(evicted.consumer);
      entry = this.fresh(event, evicted.count + 1, evicted.count);
      entry.index = 0;
      this.heap[0] = entry;
      this.byConsumer.set(event.consumer, entry);
      this.siftDown(0);
    }
    entry.lastSeen = event.at;
    this.addAliases(event.consumer, event.aliases);
    remember(entry.clientVersions, event.clientVersion);
    remember(entry.userAgents, event.userAgent);
  }

  /**
   * Adds aliases to a request already {@link record recorded} (a request may use aliases in its query
   * and then in its body) without counting the request again. No-op for an untracked consumer.
   * @param consumer The consumer id, as recorded.
   * @param aliases The aliases the request used.
   * @throws Nothing.
   */
  addAliases(consumer: string, aliases: readonly string[]): void {
    const entry = this.byConsumer.get(consumer);
    if (entry === undefined) return;
    for (const alias of aliases) {
      const n = entry.aliases.get(alias);
      if (n !== undefined) entry.aliases.set(alias, n + 1);
      else if (entry.aliases.size < MAX_ALIASES_PER_CONSUMER) entry.aliases.set(alias, 1);
    }
  }

  /**
   * The `limit` consumers with the highest counts, highest first (ties: the smaller `error`, then the
   * most recent, first).
   * @param limit Most entries returned (default: all tracked).
   * @returns The consumers' descriptions, as {@link ranking}'s `slice(0, length)`.
   * @throws {RangeError} as {@link ranking}'s `slice`.
   */
  top(limit = this.capacity): ConsumerUsage[] {
    const ranking = this.ranking(limit);
    return ranking.slice(0, ranking.length);
  }

  /**
   * {@link top}'s listing, to be read in slices: ranking the table is one sort of references, while
   * describing each consumer (its dates, aliases and lists copied) and serialising it cost ~20 times
   * that (100,000 consumers: ~40 ms to rank, ~600 ms for the whole listing as one JSON document), so a
   * reader that must not hold the event loop that long (the usage report, usage-routes.ts) describes a
   * slice at a time. The order and each consumer's `count`, `error` and `lastSeen` are those at the
   * call; the rest of a consumer's description is read when its slice is (records between slices may
   * have added an alias, a version or a user agent). A consumer evicted or reset meanwhile is still
   * described as it was.
   * @param limit Most consumers listed (default: all tracked).
   * @returns `length`, the consumers listed, and `slice(from, to)`, their descriptions in that range.
   * @throws Nothing itself; `slice` throws {RangeError} (`toISOString`) when a recorded `at` is not a
   *   valid time (never for `Date.now()`).
   * @example
   * const listing = table.ranking();
   * for (let at = 0; at < listing.length; at += 500) send(listing.slice(at, at + 500));
   */
  ranking(limit = this.capacity): UsageRanking {
    const keep = Number.isNaN(limit) ? 0 : Math.max(0, Math.trunc(limit));
    let ranked: Ranked[];
    if (keep <= SELECT_BELOW && keep < this.byConsumer.size) {
      // A few heaviest (`?limit=10`): one pass keeping them, no sort of the table.
      ranked = [];
      if (keep > 0)
        for (const entry of this.byConsumer.values())
          keepHighest(
            ranked,
            keep,
            (other) => rankOrder(entry, other) < 0,
            () => snapshot(entry),
          );
    } else {
      ranked = [...this.byConsumer.values()].map(snapshot).sort(rankOrder);
      if (ranked.length > keep) ranked.length = keep;
    }
    return {
      length: ranked.length,
      slice: (from, to) =>
        ranked.slice(from, to).map(({ entry: e, count, error, lastSeen }) => ({
          consumer: e.consumer,
          count,
          error,
          aliases: Object.fromEntries(e.aliases),
          clientVersions: [...e.clientVersions],
          userAgents: [...e.userAgents],
          firstSeen: new Date(e.firstSeen).toISOString(),
          lastSeen: new Date(lastSeen).toISOString(),
        })),
    };
  }

  /**
   * The `limit` consumers with the highest guaranteed counts — `count - error`, the space-saving lower
   * bound (Metwally et al.) — highest first (ties: the most recent first), each with that bound as its
   * `count`: what `shim_alias_consumers` exports. Ranked by `count`, a flood of one-off consumers (each
   * inheriting the evicted minimum as its count, and as its error) filled the gauge's 10 series with
   * counts of 78 for consumers seen once, above real consumers with fewer requests (lifecycle audit,
   * 2026-11-26); their lower bound is 1. One pass over the table, no sort.
   * @param limit Most consumers returned (the gauge's 10).
   * @returns `{ consumer, count }`, at most `limit` of them; `count` the guaranteed number of aliased
   *   requests (at least this many); none for a `limit` below 1.
   * @throws Nothing.
   * @example
   * table.guaranteed(10); // [{ consumer: 'team-a', count: 1200 }, …]
   */
  guaranteed(limit: number): Array<{ consumer: string; count: number }> {
    const kept: Array<{ consumer: string; count: number; lastSeen: number }> = [];
    if (!(limit >= 1)) return kept;
    for (const entry of this.byConsumer.values()) {
      const count = entry.count - entry.error;
      keepHighest(
        kept,
        limit,
        (other) => count > other.count || (count === other.count && entry.lastSeen > other.lastSeen),
        () => ({ consumer: entry.consumer, count, lastSeen: entry.lastSeen }),
      );
    }
    return kept.map(({ consumer, count }) => ({ consumer, count }));
  }

  /** Forgets every consumer and the count of requests recorded. Never throws. */
  reset(): void {
    this.byConsumer.clear();
    this.heap.length = 0;
    this.total = 0;
  }

  private fresh(event: UsageEvent, count: number, error: number): Entry {
    return {
      consumer: event.consumer,
      count,
      error,
      aliases: new Map(),
      clientVersions: [],
      userAgents: [],
      firstSeen: event.at,
      lastSeen: event.at,
      index: 0,
    };
  }

  private swap(i: number, j: number): void {
    const a = this.heap[i]!;
    const b = this.heap[j]!;
    this.heap[i] = b;
    this.heap[j] = a;
    a.index = j;
    b.index = i;
  }

  private siftUp(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.heap[parent]!.count <= this.heap[i]!.count) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private siftDown(i: number): void {
    const n = this.heap.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < n && this.heap[l]!.count < this.heap[smallest]!.count) smallest = l;
      if (r < n && this.heap[r]!.count < this.heap[smallest]!.count) smallest = r;
      if (smallest === i) return;
      this.swap(i, smallest);
      i = smallest;
    }
  }
}
