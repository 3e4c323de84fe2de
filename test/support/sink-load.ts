/**
 * Load and checks shared by the broker sink tests (NATS, RabbitMQ): rounds of `{seq}` events over
 * keys k0…k(n-1), their statuses in the outbox, and what a consumer read back of them.
 */
import type pg from 'pg';
import { expect } from 'vitest';
import { readStatus } from '../../src/ops/status.ts';
import { evaluate } from '../../src/ops/status-report.ts';
import { parseLsn } from '../../src/replication/lsn.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { waitFor } from './postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  orderViolations,
  slotPosition,
  testConfig,
} from './relay.ts';

type Db = {
  pool: pg.Pool;
  name: string;
  url: string;
  query<T>(sql: string, params?: unknown[]): Promise<T[]>;
};

export function sinkLoad(db: Db) {
  async function statuses(
    ids: string[],
  ): Promise<Map<string, { status: string; last_error: string | null }>> {
    const r = await db.query<{ id: string; status: string; last_error: string | null }>(
      'SELECT o.id::text AS id, status, last_error FROM outbox_with_status o WHERE o.id = ANY($1::bigint[])',
      [ids],
    );
    return new Map(r.map((x) => [x.id, x]));
  }

  /**
   * Until no event of `ids` is pending (each published or failed). `timeoutMs` bounds the time
   * without progress (the pending count not falling), not the whole wait: a broker that stores a
   * few thousand persistent messages a second on a loaded machine takes minutes over a backlog
   * that a quiet one drains in seconds; the absolute cap is 6 × timeoutMs.
   */
  async function settled(ids: string[], timeoutMs = 60_000): Promise<void> {
    await waitFor(async () => [...(await statuses(ids)).values()].every((s) => s.status !== 'pending'), {
      timeoutMs,
      intervalMs: 250,
      progress: async () => [...(await statuses(ids)).values()].filter((s) => s.status === 'pending').length,
      message: async () => {
        const s = [...(await statuses(ids)).values()].filter((x) => x.status === 'pending');
        return `${s.length} of ${ids.length} events still pending`;
      },
    });
  }

  /**
   * The outbox's statuses of `ids`, counted, with the first error of each status: what a
   * failed "0 lost" check prints, so a loss can be told from events recorded failed.
   */
  async function statusSummary(ids: string[]): Promise<string> {
    const counts = new Map<string, { n: number; error: string | null }>();
    for (const s of (await statuses(ids)).values()) {
      const c = counts.get(s.status) ?? { n: 0, error: s.last_error };
      c.n++;
      counts.set(s.status, c);
    }
    return [...counts]
      .map(([status, c]) => `${status} ${c.n}${c.error ? ` (first error: ${c.error.slice(0, 300)})` : ''}`)
      .join(', ');
  }

  /** `rounds` transactions, each one `{seq}` event per key k0…k(keys-1). */
  async function insertRounds(
    aggregateType: string,
    keys: number,
    rounds: number,
    from = 0,
  ): Promise<string[]> {
    const ids: string[] = [];
    for (let s = from; s < from + rounds; s++) {
      const rows = [];
      for (let k = 0; k < keys; k++)
        rows.push({
          aggregateType,
          aggregateId: `k${k}`,
          eventType: 'Tick',
          payload: JSON.stringify({ seq: s }),
        });
      ids.push(...(await insertEvents(db.pool, rows)));
    }
    return ids;
  }

  /** insertRounds, one round after the other (`pauseMs` apart), until stopped. */
  function backgroundInserts(aggregateType: string, keys: number, pauseMs = 0) {
    let rounds = 0;
    let stop = false;
    const ids: string[] = [];
    const done = (async () => {
      while (!stop) {
        ids.push(...(await insertRounds(aggregateType, keys, 1, rounds)));
        rounds++;
        if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
      }
    })();
    return {
      ids,
      rounds: () => rounds,
      async stop() {
        stop = true;
        await done;
        return rounds;
      },
    };
  }

  /**
   * The shape of the broker-fault tests (kill -9 and restart, SIGSTOP and SIGCONT): once `stored()`
   * reaches `flowing`, `fault()`; an event (aggregate id `marker`) is committed during it, and after
   * the relay failed at least twice more the slot must not be confirmed past that commit. Then
   * `roundsDuring` more rounds are inserted, `recover()` (always, even when a check failed), and
   * `roundsAfter` more rounds; the load stops. Returns its rounds.
   */
  async function faultMidStream(o: {
    relay: Relay;
    load: ReturnType<typeof backgroundInserts>;
    stored: () => Promise<number>;
    flowing: number;
    aggregateType: string;
    marker: string;
    fault: () => Promise<void> | void;
    recover: () => Promise<void> | void;
    roundsDuring?: number;
    roundsAfter: number;
  }): Promise<number> {
    await waitFor(async () => (await o.stored()) >= o.flowing, {
      timeoutMs: 60_000,
      message: 'events flowing before the fault',
    });
    await o.fault();
    try {
      const errorsBefore = await brokerErrors(o.relay);
      const { commitLsn } = await insertEventsReportingCommit(db, [
        { aggregateType: o.aggregateType, aggregateId: o.marker, eventType: 'Tick', payload: '{"seq":0}' },
      ]);
      await waitFor(async () => (await brokerErrors(o.relay)) >= errorsBefore + 2, {
        timeoutMs: 60_000,
        message: 'the relay meets the fault',
      });
      expect(parseLsn((await slotPosition(db)).confirmed) <= parseLsn(commitLsn)).toBe(true);
      const during = o.load.rounds();
      await waitFor(() => o.load.rounds() >= during + (o.roundsDuring ?? 0), {
        timeoutMs: 60_000,
        message: 'rounds inserted during the fault',
      });
    } finally {
      await o.recover();
    }
    const after = o.load.rounds();
    await waitFor(() => o.load.rounds() >= after + o.roundsAfter, {
      timeoutMs: 60_000,
      message: 'rounds after the recovery',
    });
    return o.load.stop();
  }

  /**
   * What `status` says to do about the failed events (ops/status.ts, status-report.ts: the console
   * shows the same remedy per event): the failed_events finding's fix, '' when there is none.
   * `topicTemplate`: the relay's, which `status` is given too (it names the topic in the fix).
   */
  async function failedEventsFix(topicTemplate: string): Promise<string> {
    const client = await db.pool.connect();
    try {
      const report = evaluate(await readStatus(client, testConfig(db, ['--topic-template', topicTemplate])));
      return report.findings.find((f) => f.id === 'failed_events')?.fix ?? '';
    } finally {
      client.release();
    }
  }

  return {
    statuses,
    statusSummary,
    settled,
    insertRounds,
    backgroundInserts,
    faultMidStream,
    failedEventsFix,
  };
}

/** Transient broker errors the relay met so far (each failed attempt of a batch counts one). */
export async function brokerErrors(r: Relay): Promise<number> {
  const m = await r.metrics.transientErrors.get();
  return m.values.filter((v) => v.labels.dependency === 'broker').reduce((a, v) => a + v.value, 0);
}

/** What a consumer read of `rounds` × `keys` `{seq}` events, in the order read: losses, copies, order. */
export function seqReport(seen: { key: string; seq: number }[], keys: number, rounds: number) {
  const unique = new Set(seen.map((s) => `${s.key}#${s.seq}`));
  const missing: string[] = [];
  for (let k = 0; k < keys; k++)
    for (let s = 0; s < rounds; s++) if (!unique.has(`k${k}#${s}`)) missing.push(`k${k}#${s}`);
  return { missing, duplicates: seen.length - unique.size, violations: orderViolations(seen) };
}
