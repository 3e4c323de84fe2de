/**
 * Load and checks shared by the broker sink tests (NATS, RabbitMQ): rounds of `{seq}` events over
 * keys k0…k(n-1), their statuses in the outbox, and what a consumer read back of them.
 */
import type pg from 'pg';
import type { Relay } from '../../src/supervisor/relay.ts';
import { waitFor } from './postgres.ts';
import { insertEvents, orderViolations } from './relay.ts';

type Db = { pool: pg.Pool; query<T>(sql: string, params?: unknown[]): Promise<T[]> };

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

  /** Until no event of `ids` is pending (each published or failed). */
  async function settled(ids: string[], timeoutMs = 60_000): Promise<void> {
    await waitFor(async () => [...(await statuses(ids)).values()].every((s) => s.status !== 'pending'), {
      timeoutMs,
      message: async () => {
        const s = [...(await statuses(ids)).values()].filter((x) => x.status === 'pending');
        return `${s.length} of ${ids.length} events still pending`;
      },
    });
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

  /** insertRounds, one round after the other, until stopped. */
  function backgroundInserts(aggregateType: string, keys: number) {
    let rounds = 0;
    let stop = false;
    const ids: string[] = [];
    const done = (async () => {
      while (!stop) {
        ids.push(...(await insertRounds(aggregateType, keys, 1, rounds)));
        rounds++;
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

  return { statuses, settled, insertRounds, backgroundInserts };
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
