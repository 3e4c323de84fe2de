/**
 * A partitioned outbox (`migrate --partitioned`, docs/outbox-table.md#partitioning): range
 * partitions of `created_at`, one per interval, named `<table>_p<start>`. Pure: which partitions
 * should exist ahead of now, which ones are old enough for retention to consider. The statements
 * are in store/partitions.ts (catalog, CREATE) and lifecycle/partition-retention.ts (DROP).
 *
 * Bounds are UTC instants: the interval's start in UTC (a week starts on Monday), whatever the
 * server's TimeZone, so the names and bounds do not move with a session setting.
 */

export const PARTITION_INTERVALS = ['hour', 'day', 'week', 'month'] as const;
export type PartitionInterval = (typeof PARTITION_INTERVALS)[number];

/** --partition-interval and --partition-premake unset: daily partitions, a week of them ahead. */
export const DEFAULT_PARTITION_INTERVAL: PartitionInterval = 'day';
export const DEFAULT_PARTITION_PREMAKE = 7;

export interface PartitionBounds {
  /** Inclusive; null = MINVALUE. */
  from: Date | null;
  /** Exclusive; null = MAXVALUE. */
  to: Date | null;
}

export interface PartitionInfo extends PartitionBounds {
  /** schema.table, quoted for SQL. */
  qualified: string;
  name: string;
  /** The DEFAULT partition (no bounds): never dropped, never counted as covering a range. */
  isDefault: boolean;
}

const HOUR = 3600_000;
const DAY = 24 * HOUR;

/** The start of the interval holding t (UTC). */
export function intervalStart(t: Date, interval: PartitionInterval): Date {
  const d = new Date(t.getTime());
  switch (interval) {
    case 'hour':
      d.setUTCMinutes(0, 0, 0);
      return d;
    case 'day':
      d.setUTCHours(0, 0, 0, 0);
      return d;
    case 'week': {
      d.setUTCHours(0, 0, 0, 0);
      const sinceMonday = (d.getUTCDay() + 6) % 7;
      return new Date(d.getTime() - sinceMonday * DAY);
    }
    case 'month':
      return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));
  }
}

/** The start of the interval after the one starting at `start`. */
export function nextStart(start: Date, interval: PartitionInterval): Date {
  switch (interval) {
    case 'hour':
      return new Date(start.getTime() + HOUR);
    case 'day':
      return new Date(start.getTime() + DAY);
    case 'week':
      return new Date(start.getTime() + 7 * DAY);
    case 'month':
      return new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1));
  }
}

/** `<table>_p20261128` (day, week), `_p2026112818` (hour), `_p202611` (month). */
export function partitionName(table: string, start: Date, interval: PartitionInterval): string {
  const iso = start.toISOString(); // 2026-11-28T18:00:00.000Z
  const ymd = iso.slice(0, 10).replace(/-/g, '');
  const suffix = interval === 'month' ? ymd.slice(0, 6) : interval === 'hour' ? ymd + iso.slice(11, 13) : ymd;
  const name = `${table}_p${suffix}`;
  // PostgreSQL truncates longer names silently: two partitions would then collide.
  if (Buffer.byteLength(name) > 63)
    throw new Error(
      `partition name ${name} is longer than PostgreSQL's 63 bytes: use a shorter --table name for a partitioned outbox`,
    );
  return name;
}

/**
 * The interval the existing partitions use, read from the newest bounded one (the relay
 * continues what migrate or an operator started); null when none tells.
 */
export function inferInterval(partitions: readonly PartitionBounds[]): PartitionInterval | null {
  const bounded = partitions.filter((p) => p.from && p.to).sort((a, b) => b.to!.getTime() - a.to!.getTime());
  const p = bounded[0];
  if (!p) return null;
  const width = p.to!.getTime() - p.from!.getTime();
  if (width === HOUR) return 'hour';
  if (width === DAY) return 'day';
  if (width === 7 * DAY) return 'week';
  if (p.from!.getUTCDate() === 1 && nextStart(p.from!, 'month').getTime() === p.to!.getTime()) return 'month';
  return null;
}

function overlaps(a: PartitionBounds, from: Date, to: Date): boolean {
  const aFrom = a.from?.getTime() ?? Number.NEGATIVE_INFINITY;
  const aTo = a.to?.getTime() ?? Number.POSITIVE_INFINITY;
  return aFrom < to.getTime() && from.getTime() < aTo;
}

/**
 * The partitions to create so that the interval holding `now` and the `ahead` intervals after it
 * exist. A range any existing partition overlaps is left alone (made by hand or by pg_partman,
 * perhaps of another width): CREATE would fail on it, and rows of that time have a home.
 */
export function missingPartitions(
  existing: readonly PartitionInfo[],
  now: Date,
  interval: PartitionInterval,
  ahead: number,
): { from: Date; to: Date }[] {
  const out: { from: Date; to: Date }[] = [];
  let from = intervalStart(now, interval);
  for (let i = 0; i <= ahead; i++) {
    const to = nextStart(from, interval);
    if (!existing.some((p) => !p.isDefault && overlaps(p, from, to))) out.push({ from, to });
    from = to;
  }
  return out;
}

/**
 * Partitions whose every possible row is older than the cutoff (upper bound <= cutoff), oldest
 * first: the ones retention may drop, once it has checked that every row in them is settled.
 */
export function agedPartitions(partitions: readonly PartitionInfo[], cutoff: Date): PartitionInfo[] {
  return partitions
    .filter((p) => !p.isDefault && p.to !== null && p.to.getTime() <= cutoff.getTime())
    .sort((a, b) => a.to!.getTime() - b.to!.getTime());
}

/** How far ahead partitions exist without a gap from the interval holding now: its end, or null when now has none. */
export function coveredUntil(partitions: readonly PartitionInfo[], now: Date): Date | null {
  let t = now;
  let found = false;
  for (;;) {
    const p = partitions.find((x) => !x.isDefault && overlaps(x, t, new Date(t.getTime() + 1)));
    if (!p) return found ? t : null;
    if (p.to === null) return new Date(8.64e15);
    found = true;
    t = p.to;
  }
}
