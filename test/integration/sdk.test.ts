import { Kafka, logLevel } from 'kafkajs';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createInbox,
  createOutbox,
  InboxError,
  type OutboxEventInput,
  OutboxTransactionError,
  OutboxValidationError,
  type SqlExecutor,
  uuidV7Time,
} from '../../src/index.ts';
import { MAX_ROWS_PER_INSERT } from '../../src/sdk/producer.ts';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { migrateDb, type RelayProcess, spawnRelay } from '../support/relay.ts';

/**
 * The application-side SDK against a real PostgreSQL, a real relay process and the real kafkajs:
 * events commit or roll back with the caller's transaction, and a consumer behind the inbox applies
 * each event exactly once through relay crashes (duplicates) and a replay (re-inserted rows).
 */

const db = useTestDatabase();
let kafka: DedicatedKafka;
let relay: RelayProcess | null = null;

/** Producer tests write to their own table, outside the relay's publication (and test the options). */
const appOutbox = createOutbox({ schema: 'app', table: 'events' });
/** The relay's table. */
const outbox = createOutbox();
const inbox = createInbox();

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

beforeAll(async () => {
  kafka = await startDedicatedKafka({ proxy: true });
  await migrateDb(db);
  await migrateDb(db, { schema: 'app', table: 'events', publication: 'app_events_pub' });
  await kafka.createTopic('outbox.event.Atomic', 1);
  await kafka.createTopic('outbox.event.Account', 3);
  const client = await db.pool.connect();
  try {
    await inbox.migrate(client);
  } finally {
    client.release();
  }
});

afterAll(async () => {
  relay?.kill('SIGKILL');
  await kafka?.stop();
});

function event(over: Partial<OutboxEventInput> = {}): OutboxEventInput {
  return {
    aggregateType: 'Order',
    aggregateId: 'o-1',
    eventType: 'OrderPlaced',
    payload: { total: 1 },
    ...over,
  };
}

/** Runs `fn` on one client between BEGIN and `end`. */
async function inTx<T>(
  fn: (c: pg.PoolClient) => Promise<T>,
  end: 'COMMIT' | 'ROLLBACK' = 'COMMIT',
): Promise<T> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query(end);
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

async function count(sql: string, params: unknown[] = []): Promise<number> {
  return Number((await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${sql}`, params))[0]!.n);
}

/** An executor that records each statement it runs. */
function recording(client: pg.PoolClient): { executor: SqlExecutor; statements: string[] } {
  const statements: string[] = [];
  return {
    statements,
    executor: {
      query: (text, params) => {
        statements.push(text);
        return client.query(text, params);
      },
    },
  };
}

/**
 * What a Knex adapter looks like (docs/sdk.md): knex.raw takes `?` placeholders, so the adapter turns the
 * SDK's `$n` into `?`; this stand-in for knex.raw turns them back into `$n` for the pg driver, as Knex does.
 */
function knexLike(client: pg.PoolClient, inTransaction?: () => boolean): SqlExecutor {
  const raw = async (sql: string, bindings: unknown[]) => {
    let n = 0;
    return client.query(
      sql.replace(/\?/g, () => `$${++n}`),
      bindings,
    );
  };
  return {
    query: (text, params = []) => raw(text.replace(/\$\d+/g, '?'), params),
    ...(inTransaction ? { inTransaction } : {}),
  };
}

describe('producer', () => {
  it('writes the event with the caller’s transaction: gone on ROLLBACK, stored on COMMIT', async () => {
    const rolledBack = await inTx((c) => appOutbox.enqueue(c, event({ aggregateId: 'rb' })), 'ROLLBACK');
    const committed = await inTx((c) =>
      appOutbox.enqueue(
        c,
        event({ aggregateId: 'ok', headers: { tenant: 'acme' }, traceparent: TRACEPARENT }),
      ),
    );
    expect(await count('app.events WHERE event_id = $1', [rolledBack.eventId])).toBe(0);
    const [row] = await db.query<Record<string, unknown>>('SELECT * FROM app.events WHERE id = $1', [
      committed.id,
    ]);
    expect(row).toMatchObject({
      event_id: committed.eventId,
      aggregate_type: 'Order',
      aggregate_id: 'ok',
      event_type: 'OrderPlaced',
      content_type: 'application/json',
      headers: { tenant: 'acme' },
      traceparent: TRACEPARENT,
      status: 'pending',
    });
    expect((row!.payload as Buffer).toString()).toBe('{"total":1}');
    // The default event id is a UUID v7 minted now.
    expect(Math.abs(uuidV7Time(committed.eventId) - Date.now())).toBeLessThan(60_000);
  });

  it('refuses an executor outside a transaction, naming the fix', async () => {
    const client = await db.pool.connect();
    try {
      await expect(appOutbox.enqueue(client, event({ eventType: 'Refused' }))).rejects.toThrow(
        OutboxTransactionError,
      );
      await expect(appOutbox.enqueue(client, event({ eventType: 'Refused' }))).rejects.toThrow(
        /allowAutocommit/,
      );
      // A pool runs each statement on any connection: never a transaction.
      await expect(appOutbox.enqueue(db.pool, event({ eventType: 'Refused' }))).rejects.toThrow(
        /not in a transaction/,
      );

      // An aborted transaction is refused too (the INSERT could not commit anyway).
      await client.query('BEGIN');
      await client.query('SELECT 1/0').catch(() => {});
      const aborted = await appOutbox
        .enqueue(client, event({ eventType: 'Refused' }))
        .catch((e: unknown) => e);
      expect(aborted).toBeInstanceOf(OutboxTransactionError);
      expect((aborted as Error).message).toMatch(/aborted .*ROLLBACK and retry/);
      await client.query('ROLLBACK');

      // BEGIN sent but not yet answered: pg's protocol status still reads idle; the SAVEPOINT probe queues
      // behind BEGIN and sees the transaction, so the event is accepted (then rolled back here).
      const begin = client.query('BEGIN');
      await appOutbox.enqueue(client, event({ eventType: 'Refused' }));
      await begin;
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await count(`app.events WHERE event_type = 'Refused'`)).toBe(0);
  });

  it('allowAutocommit writes an event on its own', async () => {
    const loose = createOutbox({ schema: 'app', table: 'events', allowAutocommit: true });
    const r = await loose.enqueue(db.pool, event({ eventType: 'Standalone' }));
    expect(await count('app.events WHERE id = $1', [r.id])).toBe(1);
  });

  it('validation errors name the field and leave the transaction usable', async () => {
    const refused = await inTx(async (c) => {
      const errors: string[] = [];
      for (const bad of [
        event({ aggregateType: '' }),
        event({ aggregateId: '' }),
        event({ eventType: '' }),
        event({ headers: { n: 1 } as unknown as Record<string, string> }),
      ]) {
        const err = await appOutbox.enqueue(c, bad).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(OutboxValidationError);
        errors.push((err as OutboxValidationError).field);
      }
      const tooBig = await createOutbox({ schema: 'app', table: 'events', maxPayloadBytes: 10 })
        .enqueue(c, event({ payload: { s: 'more than ten bytes' } }))
        .catch((e: OutboxValidationError) => e.field);
      const many = await appOutbox
        .enqueueMany(c, [event(), event({ aggregateId: '' })])
        .catch((e: OutboxValidationError) => e.field);
      await appOutbox.enqueue(c, event({ eventType: 'AfterRefusals' }));
      return [...errors, tooBig, many];
    });
    expect(refused).toEqual([
      'aggregateType',
      'aggregateId',
      'eventType',
      'headers.n',
      'payload',
      'events[1].aggregateId',
    ]);
    // Nothing of the refused batch was written; the valid event after the refusals committed.
    expect(await count(`app.events WHERE event_type = 'AfterRefusals'`)).toBe(1);
    expect(await count(`app.events WHERE aggregate_id = ''`)).toBe(0);
  });

  it('enqueueMany is one multi-row INSERT, results in input order', async () => {
    const events = Array.from({ length: 40 }, (_, i) =>
      event({ aggregateId: `many-${i}`, eventType: 'Many', payload: i % 5 === 0 ? null : { i } }),
    );
    const { statements, out } = await inTx(async (c) => {
      const rec = recording(c);
      return { statements: rec.statements, out: await appOutbox.enqueueMany(rec.executor, events) };
    });
    expect(statements.filter((s) => s.startsWith('INSERT'))).toHaveLength(1);
    expect(out).toHaveLength(40);
    const ids = out.map((r) => BigInt(r.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : 1)));
    const rows = await db.query<{
      id: string;
      event_id: string;
      aggregate_id: string;
      payload: Buffer | null;
    }>(
      `SELECT id::text, event_id::text, aggregate_id, payload FROM app.events e WHERE event_type = 'Many' ORDER BY e.id`,
    );
    expect(rows.map((r) => r.aggregate_id)).toEqual(events.map((e) => e.aggregateId));
    expect(rows.map((r) => ({ id: r.id, eventId: r.event_id }))).toEqual(out);
    expect(rows.map((r) => r.payload?.toString() ?? null)).toEqual(
      events.map((_, i) => (i % 5 === 0 ? null : JSON.stringify({ i }))),
    );
    // Minted in order: v7 ids of one call sort like the rows.
    expect(out.map((r) => r.eventId)).toEqual(out.map((r) => r.eventId).sort());
  });

  it('splits a batch over the bind-parameter limit into several INSERTs of one transaction', async () => {
    const n = MAX_ROWS_PER_INSERT + 9;
    const events = Array.from({ length: n }, (_, i) =>
      event({ aggregateId: `b-${i}`, eventType: 'Bulk', payload: [i] }),
    );
    const { statements, out } = await inTx(async (c) => {
      const rec = recording(c);
      return { statements: rec.statements, out: await appOutbox.enqueueMany(rec.executor, events) };
    });
    expect(statements.filter((s) => s.startsWith('INSERT'))).toHaveLength(2);
    expect(out).toHaveLength(n);
    const rows = await db.query<{ aggregate_id: string }>(
      `SELECT aggregate_id FROM app.events WHERE event_type = 'Bulk' ORDER BY id`,
    );
    expect(rows.map((r) => r.aggregate_id)).toEqual(events.map((e) => e.aggregateId));
  });

  it('works through a Knex-like adapter (`?` placeholders, no pg client underneath visible)', async () => {
    const r = await inTx((c) => appOutbox.enqueue(knexLike(c), event({ eventType: 'ViaAdapter' })));
    expect(await count(`app.events WHERE event_type = 'ViaAdapter' AND id = $1`, [r.id])).toBe(1);
    await inTx((c) =>
      appOutbox.enqueueMany(
        knexLike(c, () => true),
        [event({ eventType: 'ViaAdapter' })],
      ),
    );
    expect(await count(`app.events WHERE event_type = 'ViaAdapter'`)).toBe(2);

    const client = await db.pool.connect();
    try {
      // Outside a transaction: refused by the SAVEPOINT probe, or by the adapter's own hook.
      await expect(appOutbox.enqueue(knexLike(client), event({ eventType: 'ViaAdapter' }))).rejects.toThrow(
        OutboxTransactionError,
      );
      await client.query('BEGIN');
      await expect(
        appOutbox.enqueue(
          knexLike(client, () => false),
          event({ eventType: 'ViaAdapter' }),
        ),
      ).rejects.toThrow(/reports no open transaction/);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await count(`app.events WHERE event_type = 'ViaAdapter'`)).toBe(2);
  });
});

describe('inbox', () => {
  beforeAll(async () => {
    await db.query('CREATE TABLE effects (event_id uuid, note text)');
  });

  const ID1 = '0190f6b0-0000-7000-8000-00000000a001';
  const ID2 = '0190f6b0-0000-7000-8000-00000000a002';
  const ID3 = '0190f6b0-0000-7000-8000-00000000a003';
  const key = (eventId: string) => ({ consumer: 'tests', eventId });
  const apply = (note: string) => async (c: pg.PoolClient) => {
    await c.query('INSERT INTO effects VALUES ($1, $2)', [ID1, note]);
    return note;
  };

  async function withClient<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await db.pool.connect();
    try {
      return await fn(client);
    } finally {
      client.release();
    }
  }

  it('processes an event once; the second time it is a duplicate and the handler does not run', async () => {
    await withClient(async (c) => {
      expect(await inbox.processOnce(c, key(ID1), apply('first'))).toEqual({
        status: 'processed',
        result: 'first',
      });
      expect(await inbox.processOnce(c, key(ID1), apply('second'))).toEqual({ status: 'duplicate' });
      // Another consumer of the same event processes it too.
      expect((await inbox.processOnce(c, { consumer: 'audit', eventId: ID1 }, apply('audit'))).status).toBe(
        'processed',
      );
    });
    expect((await db.query('SELECT note FROM effects ORDER BY note')).map((r) => r.note)).toEqual([
      'audit',
      'first',
    ]);
  });

  it('a failing handler rolls back its effects and the claim, so the retry processes the event', async () => {
    await withClient(async (c) => {
      const failing = async (cl: pg.PoolClient) => {
        await cl.query(`INSERT INTO effects VALUES ($1, 'failed')`, [ID2]);
        throw new Error('handler failed');
      };
      await expect(inbox.processOnce(c, key(ID2), failing)).rejects.toThrow('handler failed');
      expect(await count(`effects WHERE note = 'failed'`)).toBe(0);
      expect((await inbox.processOnce(c, key(ID2), async () => 'retried')).status).toBe('processed');
    });
  });

  it('refuses to report success for a transaction the handler broke', async () => {
    await withClient(async (c) => {
      const swallowing = async (cl: pg.PoolClient) => {
        await cl.query(`INSERT INTO effects VALUES ($1, 'swallowed')`, [ID3]);
        await cl.query('SELECT 1/0').catch(() => {});
      };
      await expect(inbox.processOnce(c, key(ID3), swallowing)).rejects.toThrow(
        /aborted, nothing was applied/,
      );
      const committing = async (cl: pg.PoolClient) => {
        await cl.query('COMMIT');
      };
      await expect(inbox.processOnce(c, key(ID3), committing)).rejects.toThrow(/ended the inbox transaction/);
    });
    expect(await count(`effects WHERE note = 'swallowed'`)).toBe(0);
  });

  it('refuses a client already in a transaction, a pool, and a bad event id', async () => {
    await withClient(async (c) => {
      await c.query('BEGIN');
      await expect(inbox.processOnce(c, key(ID3), async () => {})).rejects.toThrow(/already in one/);
      await c.query('ROLLBACK');
      await expect(inbox.processOnce(c, key('nope'), async () => {})).rejects.toThrow(InboxError);
    });
    await expect(
      inbox.processOnce(db.pool as unknown as pg.PoolClient, key(ID3), async () => {}),
    ).rejects.toThrow(/pool\.connect/);
  });

  it('migrate is idempotent and safe to run concurrently', async () => {
    const other = createInbox({ schema: 'consumer', table: 'seen' });
    await Promise.all([withClient((c) => other.migrate(c)), withClient((c) => other.migrate(c))]);
    await withClient((c) => other.migrate(c));
    expect(await count('consumer.seen')).toBe(0);
  });

  it('prune deletes old claims in batches and keeps recent ones', async () => {
    const pruned = createInbox({ table: 'prune_inbox' });
    await withClient((c) => pruned.migrate(c));
    await db.query(
      `INSERT INTO prune_inbox (consumer, event_id, processed_at)
       SELECT 'c', gen_random_uuid(), now() - CASE WHEN g <= 25 THEN interval '2 hours' ELSE interval '1 minute' END
         FROM generate_series(1, 30) g`,
    );
    const n = await withClient(async (c) => {
      const rec = recording(c);
      const deleted = await pruned.prune(rec.executor, { olderThanMs: 3_600_000, batchSize: 10 });
      expect(rec.statements.filter((s) => s.includes('DELETE'))).toHaveLength(3); // 10 + 10 + 5
      return deleted;
    });
    expect(n).toBe(25);
    expect(await count('prune_inbox')).toBe(5);
    expect(await count(`prune_inbox WHERE processed_at > now() - interval '1 hour'`)).toBe(5);
  });
});

describe('through a relay', () => {
  async function startRelay(): Promise<RelayProcess> {
    const r = spawnRelay(db, kafka);
    relay = r;
    await r.waitForLog(/streaming from the slot/, 30_000);
    return r;
  }

  async function stopRelay(): Promise<void> {
    const r = relay;
    relay = null;
    r?.kill('SIGTERM');
    expect(await r?.exited).toBe(0);
  }

  it('publishes committed events in order and never the rolled-back ones', async () => {
    await startRelay();
    const atomic = (i: number) =>
      event({ aggregateType: 'Atomic', aggregateId: 'a-1', eventType: 'Step', payload: { i } });
    const rolledBack = await inTx(
      (c) => outbox.enqueueMany(c, [atomic(-1), atomic(-2), atomic(-3)]),
      'ROLLBACK',
    );
    const committed = await inTx((c) => outbox.enqueueMany(c, [0, 1, 2, 3, 4].map(atomic)));
    await waitFor(async () => (await kafka.readAll('outbox.event.Atomic')).length >= 5, {
      message: 'committed events published',
    });
    // The rolled-back transaction came first in the WAL: had it been relayed, it would be here by now.
    const records = await kafka.readAll('outbox.event.Atomic');
    expect(records.map((m) => m.headers.id?.toString())).toEqual(committed.map((r) => r.eventId));
    expect(records.map((m) => JSON.parse(m.value!.toString()).i)).toEqual([0, 1, 2, 3, 4]);
    expect(await count('outbox WHERE event_id = ANY($1::uuid[])', [rolledBack.map((r) => r.eventId)])).toBe(
      0,
    );
    await stopRelay();
  });

  it('applies every event exactly once through relay SIGKILLs (duplicates) and a replay', async () => {
    const ACCOUNTS = 8;
    const TRANSACTIONS = 300;
    const KILLS = 5;
    const topic = 'outbox.event.Account';
    await db.query('CREATE TABLE balances (account text PRIMARY KEY, total bigint NOT NULL DEFAULT 0)');
    await db.query(`INSERT INTO balances SELECT 'acct-' || g FROM generate_series(0, ${ACCOUNTS - 1}) g`);

    // Consumer: the real kafkajs in a consumer group, each message through the inbox.
    let applied = 0;
    let duplicates = 0;
    const consumer = new Kafka({
      clientId: 'sdk-e2e',
      brokers: kafka.brokers,
      logLevel: logLevel.NOTHING,
    }).consumer({
      groupId: 'billing',
      maxWaitTimeInMs: 100,
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: inbox.kafkaEachMessage({
        consumer: 'billing',
        pool: db.pool,
        handler: async (client, message) => {
          const { amount } = JSON.parse(message.payload!.toString()) as { amount: number };
          await client.query('UPDATE balances SET total = total + $1 WHERE account = $2', [
            amount,
            message.key,
          ]);
          applied++;
        },
        onDuplicate: () => duplicates++,
      }),
    });

    try {
      // Producer: business transactions of 1-4 events through the SDK; every 7th rolls back.
      const expected = new Map<string, number>();
      let committedEvents = 0;
      let seed = 42;
      const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      const producer = (async () => {
        for (let t = 0; t < TRANSACTIONS; t++) {
          const events = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => ({
            account: `acct-${Math.floor(rnd() * ACCOUNTS)}`,
            amount: 1 + Math.floor(rnd() * 100),
          }));
          const rollback = t % 7 === 6;
          await inTx(
            (c) =>
              outbox.enqueueMany(
                c,
                events.map((e) => ({
                  aggregateType: 'Account',
                  aggregateId: e.account,
                  eventType: 'Deposited',
                  payload: { amount: e.amount },
                })),
              ),
            rollback ? 'ROLLBACK' : 'COMMIT',
          );
          if (!rollback) {
            committedEvents += events.length;
            for (const e of events) expected.set(e.account, (expected.get(e.account) ?? 0) + e.amount);
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      })();

      // A slow broker keeps produced-but-unconfirmed events in flight, so kills cause redeliveries.
      kafka.proxies[0]!.setLatency(30);
      const uniqueInTopic = async () =>
        new Set((await kafka.readAll(topic)).map((m) => m.headers.id?.toString())).size;
      const publishedRows = () =>
        count(`outbox_with_status WHERE aggregate_type = 'Account' AND status = 'published'`);
      for (let k = 0; k < KILLS; k++) {
        const r = await startRelay();
        // Kill while the broker holds events whose rows are not yet marked published: the slot cannot be
        // confirmed past them, so the next relay must publish them again.
        await waitFor(async () => (await uniqueInTopic()) > (await publishedRows()), {
          timeoutMs: 3_000,
          intervalMs: 5,
        }).catch(() => {});
        r.kill('SIGKILL');
        expect(await r.exited).toBe('SIGKILL');
        relay = null;
      }
      await producer;
      kafka.proxies[0]!.setLatency(0);
      await startRelay();

      let inboxed = 0;
      await waitFor(
        async () => (inboxed = await count(`outbox_inbox WHERE consumer = 'billing'`)) === committedEvents,
        {
          // Bounded by progress: the drain's length scales with the machine's load.
          timeoutMs: 90_000,
          progress: () => inboxed,
          intervalMs: 200,
          message: async () =>
            `${committedEvents} events applied (inbox has ${await count(`outbox_inbox WHERE consumer = 'billing'`)}, topic ${(await kafka.readAll(topic)).length} records)`,
        },
      );
      const records = await kafka.readAll(topic);
      const relayDuplicates = records.length - new Set(records.map((m) => m.headers.id?.toString())).size;
      await waitFor(() => applied + duplicates >= records.length, { message: 'every record consumed' });
      console.log(
        `sdk e2e: ${committedEvents} events, ${KILLS} SIGKILLs, ${records.length} records (${relayDuplicates} duplicates), ${duplicates} absorbed by the inbox`,
      );
      // With the proxy's latency a kill always finds events stored but not yet marked.
      expect(
        relayDuplicates,
        'the kills must have caused redeliveries, or this test proves nothing',
      ).toBeGreaterThan(0);
      expect(duplicates).toBeGreaterThanOrEqual(relayDuplicates);
      expect(applied).toBe(committedEvents);
      const balances = async () =>
        Object.fromEntries(
          (
            await db.query<{ account: string; total: string }>('SELECT account, total::text FROM balances')
          ).map((r) => [r.account, Number(r.total)]),
        );
      const want = Object.fromEntries(
        Array.from({ length: ACCOUNTS }, (_, a) => [`acct-${a}`, expected.get(`acct-${a}`) ?? 0]),
      );
      expect(await balances()).toEqual(want);

      // Replay: an operator re-inserts a window of rows with their original event ids.
      const replayed = await db.query<{ id: string }>(
        `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent)
         SELECT event_id, aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent
           FROM outbox WHERE aggregate_type = 'Account' ORDER BY id LIMIT 40
         RETURNING id`,
      );
      expect(replayed).toHaveLength(40);
      const before = duplicates;
      await waitFor(() => duplicates - before >= 40, {
        timeoutMs: 30_000,
        message: () => `replayed events absorbed (${duplicates - before} of 40)`,
      });
      expect(applied).toBe(committedEvents);
      expect(await balances()).toEqual(want);
      expect(await count(`outbox_inbox WHERE consumer = 'billing'`)).toBe(committedEvents);
    } finally {
      kafka.proxies[0]!.setLatency(0);
      await consumer.disconnect();
      await stopRelay().catch(() => {});
    }
  });
});
