/**
 * Issue 11: the per-slot progress record instead of a row write per published event, against real
 * PostgreSQL. What each test would catch:
 *  - the relay writing rows (or more than one progress statement) per batch on the happy path;
 *  - an event shown published before the broker took it, or lost, when the relay dies between the
 *    publish and the progress write;
 *  - compaction covering an id whose transaction is still open (a row shown published that never
 *    was), or never shrinking gaps of rolled-back ids;
 *  - counting pending events by scanning the table.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Classified } from '../../src/errors.ts';
import { parseIdRanges } from '../../src/lifecycle/id-ranges.ts';
import { outboxEvents } from '../../src/lifecycle/operator-events.ts';
import { compactProgress, readProgress, unpublishedRowsSql } from '../../src/lifecycle/progress.ts';
import { countEvents, listEvents } from '../../src/lifecycle/queries.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { selectTargets, showEvent } from '../../src/ops/events.ts';
import type { OutboundMessage } from '../../src/route/event.ts';
import type { Sink } from '../../src/sinks/sink.ts';
import { Relay } from '../../src/supervisor/relay.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/postgres.ts';
import { type EventRow, insertEvents, migrateDb, slotOf, spawnCli, testConfig } from '../support/relay.ts';

const TABLE = '"public"."outbox"';
const PROGRESS = '"public"."outbox_relay_progress"';

class CaptureSink implements Sink {
  readonly name = 'capture';
  readonly messages: OutboundMessage[] = [];
  publishes = 0;
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async publish(batch: readonly OutboundMessage[]): Promise<void> {
    this.publishes++;
    this.messages.push(...batch);
  }
  classify(e: unknown): Classified {
    return { class: 'transient', reason: 'TEST', message: String(e) };
  }
}

const rows = (n: number, type: string, prefix = 'k'): EventRow[] =>
  Array.from({ length: n }, (_, i) => ({
    aggregateType: type,
    aggregateId: `${prefix}${i}`,
    eventType: 'E',
    payload: '{}',
  }));

async function statuses(db: TestDatabase, ids: string[]): Promise<string[]> {
  const r = await db.query<{ status: string }>(
    'SELECT status FROM outbox_with_status o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id',
    [ids],
  );
  return r.map((x) => x.status);
}

async function withDb(name: string, fn: (db: TestDatabase) => Promise<void>): Promise<void> {
  const db = await createTestDatabase({ name });
  try {
    await migrateDb(db);
    await fn(db);
  } finally {
    await db.close();
  }
}

describe('one progress statement per batch, no row writes', () => {
  type Recorded = { text: string; values: unknown[] | undefined };
  const recorded: Recorded[] = [];
  const original = pg.Client.prototype.query;
  beforeAll(() => {
    // Every statement of this process (the in-process relay's pool included) is recorded.
    pg.Client.prototype.query = function (this: pg.Client, config: unknown, values?: unknown, cb?: unknown) {
      const text = typeof config === 'string' ? config : ((config as { text?: string })?.text ?? '');
      const vals = Array.isArray(values) ? values : (config as { values?: unknown[] })?.values;
      recorded.push({ text, values: vals });
      // biome-ignore lint/suspicious/noExplicitAny: forwarding pg's overloads as they came
      return (original as any).call(this, config, values, cb);
    } as typeof pg.Client.prototype.query;
  });
  afterAll(() => {
    pg.Client.prototype.query = original;
  });

  it('drains 1,000 events with no UPDATE of outbox rows and one single-range progress statement per batch', async () => {
    await withDb('progress_stmts', async (db) => {
      const sink = new CaptureSink();
      const config = testConfig(db, [
        '--batch-size',
        '100',
        '--linger-ms',
        '5',
        '--sweep-interval-ms',
        '60000',
      ]);
      const relay = new Relay({ config, sink, log: silentLogger() });
      void relay.start();
      try {
        await waitFor(() => relay.state === 'streaming', { message: 'relay streaming' });
        const ids: string[] = [];
        for (let t = 0; t < 10; t++) ids.push(...(await insertEvents(db.pool, rows(100, 'Order', `t${t}-`))));
        await waitFor(async () => (await statuses(db, ids)).every((s) => s === 'published'), {
          timeoutMs: 30_000,
          message: async () =>
            `published: ${(await statuses(db, ids)).filter((s) => s === 'published').length}`,
        });
        const progress = recorded.filter((r) =>
          /UPDATE "public"\."outbox_relay_progress" SET published = published \+/.test(r.text),
        );
        const rowWrites = recorded.filter((r) => /UPDATE "public"\."outbox"(\s|$)/.test(r.text));
        expect(sink.messages.filter((m) => m.event.aggregateType === 'Order')).toHaveLength(1000);
        expect(rowWrites.map((r) => r.text.slice(0, 80))).toEqual([]);
        expect(progress.length).toBeGreaterThan(0);
        // At most one per published batch (the sink saw every batch).
        expect(progress.length).toBeLessThanOrEqual(sink.publishes);
        // The statement's size does not grow with the batch: contiguous ids are one range.
        for (const p of progress) expect(String(p.values?.[1])).toMatch(/^\{\[\d+,\d+\)\}$/);
        const record = parseIdRanges((await readProgress(db.pool, PROGRESS, slotOf(db)))!);
        expect(record).toHaveLength(1);
      } finally {
        await relay.stop();
      }
    });
  }, 60_000);
});

describe('a relay killed between the publish and the progress write', () => {
  it('shows the events pending (never published before recorded), sends them again after restart, then published', async () => {
    await withDb('progress_kill', async (db) => {
      const args = [
        'run',
        '--sink',
        'stdout',
        '--database-url',
        db.url,
        '--slot',
        slotOf(db),
        '--linger-ms',
        '0',
      ];
      // Hold the slot's progress row: the relay publishes, then blocks on its progress statement.
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      const first = spawnCli(args);
      let second: ReturnType<typeof spawnCli> | undefined;
      try {
        await first.waitForLog(/streaming from the slot/, 30_000);
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM outbox_relay_progress WHERE slot_name = $1 FOR UPDATE', [
          slotOf(db),
        ]);
        const ids = await insertEvents(db.pool, rows(3, 'Kill'));
        const eventIds = (
          await db.query<{ event_id: string }>(
            'SELECT event_id::text FROM outbox WHERE id = ANY($1::bigint[])',
            [ids],
          )
        ).map((r) => r.event_id);
        const [{ lsn: afterInsert } = { lsn: '' }] = await db.query<{ lsn: string }>(
          'SELECT pg_current_wal_insert_lsn()::text AS lsn',
        );
        // Published (the sink printed them) …
        await waitFor(() => eventIds.every((e) => first.stdout().includes(e)), { message: 'printed' });
        // … the progress statement is waiting for the lock:
        await waitFor(
          async () =>
            (
              await db.query<{ n: string }>(
                `SELECT count(*)::text AS n FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%outbox_relay_progress%SET published = published +%'`,
              )
            )[0]!.n === '1',
          {
            message: async () =>
              `progress statement blocked: ${JSON.stringify(await db.query('SELECT state, wait_event_type, left(query, 80) AS q FROM pg_stat_activity WHERE datname = current_database()'))}`,
          },
        );
        expect(await statuses(db, ids)).toEqual(['pending', 'pending', 'pending']);
        const [slot] = await db.query<{ confirmed: string }>(
          'SELECT confirmed_flush_lsn::text AS confirmed FROM pg_replication_slots WHERE slot_name = $1',
          [slotOf(db)],
        );
        const [cmp] = await db.query<{ before: boolean }>('SELECT $1::pg_lsn < $2::pg_lsn AS before', [
          slot!.confirmed,
          afterInsert,
        ]);
        expect({ confirmed: slot!.confirmed, afterInsert, before: cmp!.before }).toMatchObject({
          before: true,
        });
        first.kill('SIGKILL');
        await first.exited;
        // The dead relay's backend would still run its statement once the lock goes: end it too
        // (a crash of the whole path), so the progress write never happens.
        await db.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND query LIKE 'UPDATE%outbox_relay_progress%SET published = published +%'`,
        );
        await holder.query('ROLLBACK');
        // Nothing was recorded: still pending, and the slot was not confirmed past them.
        expect(await statuses(db, ids)).toEqual(['pending', 'pending', 'pending']);

        second = spawnCli(args);
        await second.waitForLog(/streaming from the slot/, 30_000);
        await waitFor(() => eventIds.every((e) => second!.stdout().includes(e)), {
          timeoutMs: 20_000,
          message: 'sent again after the restart',
        });
        await waitFor(async () => (await statuses(db, ids)).every((s) => s === 'published'), {
          message: 'recorded published',
        });
      } finally {
        first.kill('SIGKILL');
        second?.kill('SIGTERM');
        await second?.exited;
        await holder.end().catch(() => {});
      }
    });
  }, 90_000);
});

describe('a relay killed after the progress write, before confirming', () => {
  it('shows the events published; the restarted stream skips them (recorded: not sent twice)', async () => {
    await withDb('progress_unconfirmed', async (db) => {
      const args = [
        'run',
        '--sink',
        'stdout',
        '--database-url',
        db.url,
        '--slot',
        slotOf(db),
        '--linger-ms',
        '0',
      ];
      const holder = new pg.Client({ connectionString: db.url });
      await holder.connect();
      const first = spawnCli(args);
      let second: ReturnType<typeof spawnCli> | undefined;
      try {
        await first.waitForLog(/streaming from the slot/, 30_000);
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM outbox_relay_progress WHERE slot_name = $1 FOR UPDATE', [
          slotOf(db),
        ]);
        // One row: one batch, whose single progress statement is held.
        const ids = await insertEvents(db.pool, rows(1, 'Unconfirmed'));
        const eventIds = (
          await db.query<{ event_id: string }>(
            'SELECT event_id::text FROM outbox WHERE id = ANY($1::bigint[])',
            [ids],
          )
        ).map((r) => r.event_id);
        const [{ lsn: afterInsert } = { lsn: '' }] = await db.query<{ lsn: string }>(
          'SELECT pg_current_wal_insert_lsn()::text AS lsn',
        );
        await waitFor(() => eventIds.every((e) => first.stdout().includes(e)), { message: 'printed' });
        const blocked = async () =>
          (
            await db.query<{ n: string }>(
              `SELECT count(*)::text AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'
                  AND query LIKE 'UPDATE%outbox_relay_progress%SET published = published +%'`,
            )
          )[0]!.n === '1';
        await waitFor(blocked, { message: 'progress statement blocked' });
        // Freeze the relay, let its progress statement through, then kill it: recorded, not confirmed.
        first.kill('SIGSTOP');
        await holder.query('ROLLBACK');
        await waitFor(async () => (await statuses(db, ids)).every((s) => s === 'published'), {
          message: 'recorded while the relay is frozen',
        });
        first.kill('SIGKILL');
        await first.exited;
        const [cmp] = await db.query<{ before: boolean }>(
          'SELECT confirmed_flush_lsn < $2::pg_lsn AS before FROM pg_replication_slots WHERE slot_name = $1',
          [slotOf(db), afterInsert],
        );
        expect(cmp!.before).toBe(true);

        second = spawnCli(args);
        await second.waitForLog(/streaming from the slot/, 30_000);
        await insertEvents(db.pool, rows(1, 'After'));
        await waitFor(() => second!.stdout().includes('"After"') || second!.stdout().includes('After'), {
          message: 'a later event printed',
        });
        // The stream delivers it again (the slot was not confirmed past them): skipped.
        for (const e of eventIds) expect(second.stdout()).not.toContain(e);
        expect(await statuses(db, ids)).toEqual(['published']);
        await waitFor(
          async () =>
            (
              await db.query<{ past: boolean }>(
                'SELECT confirmed_flush_lsn >= $2::pg_lsn AS past FROM pg_replication_slots WHERE slot_name = $1',
                [slotOf(db), afterInsert],
              )
            )[0]!.past,
          { message: 'confirmed past them after the restart' },
        );
      } finally {
        first.kill('SIGKILL');
        second?.kill('SIGTERM');
        await second?.exited;
        await holder.end().catch(() => {});
      }
    });
  }, 90_000);
});

describe('compaction of the progress record', () => {
  it('never covers an id whose transaction is still open; fills rolled-back ids once the horizon passed', async () => {
    await withDb('progress_compact', async (db) => {
      const sink = new CaptureSink();
      const config = testConfig(db, ['--linger-ms', '0', '--sweep-interval-ms', '600000']);
      const relay = new Relay({ config, sink, log: silentLogger() });
      void relay.start();
      const open = new pg.Client({ connectionString: db.url });
      await open.connect();
      const slot = slotOf(db);
      const compactUntil = async (step: string) => {
        for (let i = 0; i < 3; i++) {
          const r = await compactProgress(db.pool, TABLE, PROGRESS, slot);
          if (r.step === step) return r;
          await new Promise((res) => setTimeout(res, 30));
        }
        return null;
      };
      try {
        await waitFor(() => relay.state === 'streaming', { message: 'relay streaming' });
        const before = await insertEvents(db.pool, rows(3, 'C', 'a'));
        // A transaction holds id k open; another rolls back two ids; three more commit.
        await open.query('BEGIN');
        const [k] = await insertEvents(open as unknown as pg.PoolClient, rows(1, 'C', 'open'));
        const rb = await db.pool.connect();
        await rb.query('BEGIN');
        const rolledBack = await insertEvents(rb, rows(2, 'C', 'rb'));
        await rb.query('ROLLBACK');
        rb.release();
        const after = await insertEvents(db.pool, rows(3, 'C', 'b'));
        await waitFor(
          async () => (await statuses(db, [...before, ...after])).every((s) => s === 'published'),
          {
            message: 'committed rows published',
          },
        );
        // The gap holds k (open) and the two rolled-back ids.
        for (let round = 0; round < 6; round++) await compactProgress(db.pool, TABLE, PROGRESS, slot);
        let record = parseIdRanges((await readProgress(db.pool, PROGRESS, slot))!);
        expect(record.some(([lo, hi]) => BigInt(k!) >= lo && BigInt(k!) < hi)).toBe(false);
        expect(record).toHaveLength(2);
        // The open transaction sees its own row as pending, not published.
        const own = await open.query<{ status: string }>(
          'SELECT status FROM outbox_with_status WHERE id = $1',
          [k],
        );
        expect(own.rows[0]!.status).toBe('pending');

        await open.query('COMMIT');
        await waitFor(async () => (await statuses(db, [k!])).every((s) => s === 'published'), {
          message: 'k published once committed',
        });
        // Horizon again (max(id), then xmax, then xmin past it): the rolled-back ids are filled.
        await waitFor(
          async () => {
            await compactUntil('fill');
            record = parseIdRanges((await readProgress(db.pool, PROGRESS, slot))!);
            return record.length === 1;
          },
          {
            timeoutMs: 20_000,
            intervalMs: 50,
            message: () => `record ${JSON.stringify(record.map(String))}`,
          },
        );
        expect(record[0]![0]).toBe(BigInt(before[0]!));
        expect(record[0]![1]).toBe(BigInt(after[2]!) + 1n);
        expect(rolledBack.every((id) => BigInt(id) > BigInt(k!) && BigInt(id) < BigInt(after[0]!))).toBe(
          true,
        );
      } finally {
        await open.end().catch(() => {});
        await relay.stop();
      }
    });
  }, 60_000);
});

describe('compaction of rows settled on the row', () => {
  it('covers ids whose rows are past pending (also below the first range), never a pending row', async () => {
    await withDb('progress_compact_rows', async (db) => {
      const ids = (await insertEvents(db.pool, rows(10, 'Old'))).map(BigInt);
      const a = ids[0]!;
      // An older relay marked rows; one failed; one was never relayed (committed before the slot).
      await db.query(`UPDATE outbox SET status = 'published' WHERE id = ANY($1::bigint[])`, [
        [0, 1, 2, 3, 6, 7, 8, 9].map((i) => String(a + BigInt(i))),
      ]);
      await db.query(`UPDATE outbox SET status = 'failed', attempts = 1 WHERE id = $1`, [String(a + 4n)]);
      await db.query('UPDATE outbox_relay_progress SET published = $2::int8multirange WHERE slot_name = $1', [
        slotOf(db),
        `{[${a + 8n},${a + 10n})}`,
      ]);
      let last = '';
      await waitFor(
        async () => {
          await compactProgress(db.pool, TABLE, PROGRESS, slotOf(db));
          last = (await readProgress(db.pool, PROGRESS, slotOf(db)))!;
          return last === `{[${a},${a + 5n}),[${a + 6n},${a + 10n})}`;
        },
        { timeoutMs: 20_000, intervalMs: 50, message: () => `record ${last}` },
      );
      expect(await statuses(db, ids.map(String))).toEqual([
        'published',
        'published',
        'published',
        'published',
        'failed',
        'pending',
        'published',
        'published',
        'published',
        'published',
      ]);
    });
  }, 60_000);
});

describe('counting pending events', () => {
  it('reads only the complement of the progress record by id ranges, never the whole table', async () => {
    await withDb('progress_count', async (db) => {
      await db.query(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload)
         SELECT 'P', g::text, 'E', '\\x7b7d' FROM generate_series(1, 20000) g`,
      );
      await db.query('ANALYZE outbox');
      // The first 19,990 ids recorded published (as a relay would), the last 10 not.
      await db.query(
        `UPDATE outbox_relay_progress SET published = int8multirange(int8range(
           (SELECT min(id) FROM outbox), (SELECT min(id) FROM outbox) + 19990)) WHERE slot_name = $1`,
        [slotOf(db)],
      );
      const sql = `SELECT count(*)::int AS n FROM ${unpublishedRowsSql(TABLE, PROGRESS)} WHERE o.status = 'pending'`;
      expect((await db.query<{ n: number }>(sql))[0]!.n).toBe(10);
      const plan = JSON.stringify(await db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`));
      expect(plan).not.toMatch(
        /"Node Type":"Seq Scan","Parent Relationship":"[A-Za-z]+","Parallel Aware":false,"Async Capable":false,"Relation Name":"outbox"/,
      );
      expect(plan).not.toMatch(/"Relation Name":"outbox","Alias":"o"[^}]*"Node Type":"Seq Scan"/);
      expect(plan).toMatch(/"Index Name":"outbox_pkey"/);
      // The view agrees.
      const byView = await db.query<{ status: string; n: string }>(
        'SELECT status, count(*)::text AS n FROM outbox_with_status GROUP BY status ORDER BY status',
      );
      expect(byView).toEqual([
        { status: 'pending', n: '10' },
        { status: 'published', n: '19990' },
      ]);
    });
  }, 60_000);
});

describe('operator reads', () => {
  it('events list, count, show and target selection report the truthful status', async () => {
    await withDb('progress_ops', async (db) => {
      const ids = await insertEvents(db.pool, rows(5, 'Ops'));
      const [covered, coveredToo, failed, retried, open] = ids as [string, string, string, string, string];
      await db.query(`UPDATE outbox SET status = 'failed', attempts = 1 WHERE id = $1`, [failed]);
      await db.query(`UPDATE outbox SET status = 'published' WHERE id = $1`, [retried]);
      // The stream settled the first four (failed written on its row first); the fifth is unsettled.
      await db.query('UPDATE outbox_relay_progress SET published = $2::int8multirange WHERE slot_name = $1', [
        slotOf(db),
        `{[${covered},${BigInt(retried) + 1n})}`,
      ]);
      const all = { statuses: ['pending', 'published', 'failed', 'dead', 'parked', 'discarded'] as const };
      expect(
        await countEvents(db.pool as unknown as pg.ClientBase, TABLE, { statuses: [...all.statuses] }),
      ).toEqual({
        pending: 1,
        published: 3,
        failed: 1,
      });
      expect(
        await countEvents(db.pool as unknown as pg.ClientBase, TABLE, { statuses: ['pending'] }),
      ).toEqual({ pending: 1 });
      const pending = await listEvents(
        db.pool as unknown as pg.ClientBase,
        TABLE,
        { statuses: ['pending'] },
        10,
      );
      expect(pending.map((r) => [r.id, r.status])).toEqual([[open, 'pending']]);
      const published = await listEvents(
        db.pool as unknown as pg.ClientBase,
        TABLE,
        { statuses: ['published'] },
        10,
      );
      expect(published.map((r) => r.id)).toEqual([covered, coveredToo, retried]);
      const failedRows = await listEvents(
        db.pool as unknown as pg.ClientBase,
        TABLE,
        { statuses: ['failed'] },
        10,
      );
      expect(failedRows.map((r) => r.id)).toEqual([failed]);
      expect(
        (await showEvent(db.pool as unknown as pg.ClientBase, outboxEvents('public', 'outbox'), covered))
          .status,
      ).toBe('published');
      expect(
        (await showEvent(db.pool as unknown as pg.ClientBase, outboxEvents('public', 'outbox'), open)).status,
      ).toBe('pending');
      expect(
        await selectTargets(
          db.pool as unknown as pg.ClientBase,
          outboxEvents('public', 'outbox'),
          { filter: { statuses: ['pending'] } },
          ['pending'],
        ),
      ).toEqual([open]);
    });
  }, 60_000);
});
