const keyOf = (aggregateType: string, aggregateId: string) => `${aggregateType}\u0000${aggregateId}`;

/**
 * Whether an event belongs to an aggregate at all: a hostile row (NULL or non-text aggregate
 * columns) has none, so it can neither block nor be parked — it fails on its own, and must not
 * be taken for the aggregate whose id is the text "null".
 */
export function hasAggregate(e: { aggregateType: unknown; aggregateId: unknown }): boolean {
  return typeof e.aggregateType === 'string' && typeof e.aggregateId === 'string';
}

/**
 * Strict ordering: aggregates whose head event failed, so later events of the same
 * aggregate must be parked behind it. Kept in memory (checked per event, no database
 * round trip) and reloaded from the table when a session starts, so a restart knows
 * what was blocked before.
 *
 * The stream decides synchronously (this event failed → block; a later one → park) and
 * writes the decision to the table later. The sweeper unblocks an aggregate once the table
 * shows nothing holding it (no failed, dead or parked row), which is only sound if no
 * decision was unwritten when it read the table and none was taken since:
 *
 *   const m = blocked.mark(type, id);      // null while a decision is unwritten
 *   … read the table: nothing holds the aggregate …
 *   blocked.unblockSince(type, id, m);     // false if anything was decided since
 *
 * Otherwise a parked row written just after the read would be stranded while newer events
 * of the aggregate flow past it, or a failure recorded just after it would be overtaken.
 */
export class BlockedAggregates {
  readonly #blocked = new Set<string>();
  /** Decisions (park, or a blocking failure) taken but not written yet. */
  readonly #pending = new Map<string, number>();
  /** Bumped by every decision: tells a sweeper's read that it is out of date. */
  readonly #epoch = new Map<string, number>();

  get size(): number {
    return this.#blocked.size;
  }

  has(aggregateType: string, aggregateId: string): boolean {
    return this.#blocked.has(keyOf(aggregateType, aggregateId));
  }

  /** The aggregates blocked now, as [aggregateType, aggregateId]. */
  keys(): [string, string][] {
    return [...this.#blocked].map((k) => k.split('\u0000', 2) as [string, string]);
  }

  /** The stream decided that this aggregate's event failed: later events are parked. Pending until written. */
  blockDecided(aggregateType: string, aggregateId: string): void {
    const k = keyOf(aggregateType, aggregateId);
    this.#blocked.add(k);
    this.#decide(k);
  }

  /** The stream decided to park an event of this aggregate; its row is not written yet. */
  parkDecided(aggregateType: string, aggregateId: string): void {
    this.#decide(keyOf(aggregateType, aggregateId));
  }

  /** A decision's row is written (or the write was abandoned with its session). */
  written(aggregateType: string, aggregateId: string): void {
    const k = keyOf(aggregateType, aggregateId);
    const n = (this.#pending.get(k) ?? 1) - 1;
    if (n <= 0) this.#pending.delete(k);
    else this.#pending.set(k, n);
  }

  /** Take before reading the table; null while a decision is unwritten (the table is not the truth yet). */
  mark(aggregateType: string, aggregateId: string): number | null {
    const k = keyOf(aggregateType, aggregateId);
    return this.#pending.has(k) ? null : (this.#epoch.get(k) ?? 0);
  }

  /** Unblocks if `mark` was taken with nothing unwritten and nothing was decided since. */
  unblockSince(aggregateType: string, aggregateId: string, mark: number | null): boolean {
    const k = keyOf(aggregateType, aggregateId);
    if (mark === null || this.#pending.has(k) || (this.#epoch.get(k) ?? 0) !== mark) return false;
    this.#blocked.delete(k);
    return true;
  }

  /** What a session starts from: exactly these aggregates blocked (read from where failures are kept). */
  replace(aggregates: Iterable<readonly [string, string]>): void {
    this.#blocked.clear();
    for (const [type, id] of aggregates) this.#blocked.add(keyOf(type, id));
  }

  #decide(k: string): void {
    this.#pending.set(k, (this.#pending.get(k) ?? 0) + 1);
    this.#epoch.set(k, (this.#epoch.get(k) ?? 0) + 1);
  }
}
