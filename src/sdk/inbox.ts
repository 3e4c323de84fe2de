import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { EachMessagePayload } from 'kafkajs';
import type pg from 'pg';
import { renderMigration } from '../store/migrate.ts';
import { ident, qualified } from '../store/sql-ident.ts';
import { InboxError } from './errors.ts';
import { UUID } from './event-input.ts';
import { type InboxMessage, toInboxMessage } from './inbox-message.ts';
import { protocolTxState, type SqlExecutor } from './sql-executor.ts';

/**
 * The consumer inbox: "effectively once" processing on top of at-least-once delivery. The event id is
 * claimed (INSERT … ON CONFLICT DO NOTHING) in the same transaction as the handler's side effects, so
 * either both commit or neither does, and a redelivered or replayed event finds its claim and is skipped.
 */

export const INBOX_SQL_DIR = fileURLToPath(new URL('../../sql/inbox/', import.meta.url));

export interface InboxOptions {
  /** Default "public". */
  schema?: string;
  /** Default "outbox_inbox". */
  table?: string;
}

export interface InboxKey {
  /** The logical consumer, e.g. "billing": each consumer of an event processes it once. */
  consumer: string;
  eventId: string;
}

export type ProcessResult<T> = { status: 'processed'; result: T } | { status: 'duplicate' };

export interface KafkaEachMessageOptions {
  consumer: string;
  /** Each message takes a client for its own transaction. */
  pool: pg.Pool;
  /** Runs inside the inbox transaction: do the side effects with `client`, do not COMMIT/ROLLBACK. */
  handler: (client: pg.PoolClient, message: InboxMessage) => Promise<void>;
  /** Values are outbox.v1.Envelope (needed for envelope-json; binary envelopes are recognised anyway). */
  envelope?: boolean;
  /** Called for each message skipped as already processed (e.g. to count redeliveries). */
  onDuplicate?: (message: InboxMessage) => void;
}

export interface Inbox {
  /** Creates the inbox table if missing (sql/inbox/*.sql). Idempotent, safe to run concurrently. */
  migrate(client: pg.ClientBase): Promise<void>;
  /** Runs `handler` once per (consumer, eventId), in a transaction of its own on `client`. */
  processOnce<C extends pg.ClientBase, T>(
    client: C,
    key: InboxKey,
    handler: (client: C) => Promise<T>,
  ): Promise<ProcessResult<T>>;
  /** A kafkajs `eachMessage` that processes each event once (see KafkaEachMessageOptions). */
  kafkaEachMessage(opts: KafkaEachMessageOptions): (payload: EachMessagePayload) => Promise<void>;
  /** Deletes claims older than `olderThanMs`, `batchSize` rows per statement; returns how many. */
  prune(executor: SqlExecutor, opts: { olderThanMs: number; batchSize?: number }): Promise<number>;
}

export function createInbox(opts: InboxOptions = {}): Inbox {
  const schema = opts.schema ?? 'public';
  const tableName = opts.table ?? 'outbox_inbox';
  const table = qualified(schema, tableName);

  async function migrate(client: pg.ClientBase): Promise<void> {
    const files = readdirSync(INBOX_SQL_DIR)
      .filter((f) => /^\d{6}_[a-z0-9_]+\.sql$/.test(f))
      .sort();
    await client.query('BEGIN');
    try {
      // Two services starting at once would race CREATE TABLE IF NOT EXISTS into a unique violation.
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `pg-outbox-relay/inbox/${schema}.${tableName}`,
      ]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${ident(schema)}`);
      for (const f of files) {
        const sql = readFileSync(INBOX_SQL_DIR + f, 'utf8');
        await client.query(renderMigration(sql, { schema, table: tableName, publication: '' }));
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  }

  async function processOnce<C extends pg.ClientBase, T>(
    client: C,
    key: InboxKey,
    handler: (client: C) => Promise<T>,
  ): Promise<ProcessResult<T>> {
    if (typeof key.consumer !== 'string' || key.consumer === '') {
      throw new InboxError('processOnce: consumer must be a non-empty string naming the consuming service');
    }
    if (typeof key.eventId !== 'string' || !UUID.test(key.eventId)) {
      throw new InboxError(
        `processOnce: eventId must be a UUID (the \`id\` header), got ${JSON.stringify(key.eventId)}`,
      );
    }
    if ('totalCount' in client && 'idleCount' in client) {
      // A pool would run BEGIN, the claim and COMMIT on different connections.
      throw new InboxError('processOnce needs one connection: pass `await pool.connect()`, not the pool');
    }
    const before = protocolTxState(client);
    if (before === 'in-transaction' || before === 'failed') {
      throw new InboxError(
        'processOnce runs its own transaction, but the client is already in one (a nested BEGIN is ignored and ' +
          'its COMMIT would end yours). Fix: pass a client outside a transaction and do the work in the handler',
      );
    }
    await client.query('BEGIN');
    try {
      const claim = await client.query(
        `INSERT INTO ${table} (consumer, event_id) VALUES ($1, $2::uuid) ON CONFLICT DO NOTHING RETURNING 1`,
        [key.consumer, key.eventId],
      );
      if (claim.rows.length === 0) {
        await client.query('ROLLBACK');
        return { status: 'duplicate' };
      }
      const result = await handler(client);
      // A handler that caught an SQL error leaves the transaction aborted; one that ran COMMIT/ROLLBACK
      // ended it. Either way "processed" would be a lie the consumer then commits its offset on.
      const during = protocolTxState(client);
      if (during === 'idle') {
        throw new InboxError(
          'the handler ended the inbox transaction (COMMIT/ROLLBACK). Fix: leave both to processOnce',
        );
      }
      // pg settles a failed query before it reads the server's transaction status, so right after a caught
      // error `during` may still say 'in-transaction': the COMMIT's answer is the check that always holds
      // (PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK, not an error).
      const done = during === 'failed' ? null : await client.query('COMMIT');
      if (done?.command !== 'COMMIT') {
        throw new InboxError(
          'the inbox transaction is aborted, nothing was applied: the handler most likely caught an SQL error and ' +
            'carried on. Fix: let the error propagate (or wrap the failing statement in a SAVEPOINT)',
        );
      }
      return { status: 'processed', result };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  }

  function kafkaEachMessage(o: KafkaEachMessageOptions): (payload: EachMessagePayload) => Promise<void> {
    // kafkajs resolves a message's offset only after eachMessage resolves, and commits only resolved
    // offsets (autoCommit, the default): the offset moves after the inbox transaction committed. A crash
    // in between redelivers the message and its claim turns it into a duplicate. A throw leaves the
    // offset where it is, and kafkajs delivers the message again.
    return async (payload) => {
      const message = toInboxMessage(payload, { envelope: o.envelope ?? false });
      const client = await o.pool.connect();
      let broken: Error | undefined;
      try {
        const r = await processOnce(client, { consumer: o.consumer, eventId: message.eventId }, (c) =>
          o.handler(c, message),
        );
        if (r.status === 'duplicate') o.onDuplicate?.(message);
      } catch (err) {
        // A client still inside a transaction (its ROLLBACK failed: connection lost) must not be reused.
        if (protocolTxState(client) !== 'idle') broken = err instanceof Error ? err : new Error(String(err));
        throw err;
      } finally {
        client.release(broken);
      }
    };
  }

  async function prune(
    executor: SqlExecutor,
    p: { olderThanMs: number; batchSize?: number },
  ): Promise<number> {
    const batchSize = p.batchSize ?? 1000;
    if (!Number.isFinite(p.olderThanMs) || p.olderThanMs < 0) {
      throw new InboxError(`prune: olderThanMs must be a non-negative number, got ${p.olderThanMs}`);
    }
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
      throw new InboxError(`prune: batchSize must be a positive integer, got ${batchSize}`);
    }
    // One cutoff for the whole run: with now() per batch a busy inbox could keep the loop going forever.
    const [row] = (
      await executor.query(`SELECT (now() - $1::bigint * interval '1 millisecond')::text AS cutoff`, [
        Math.floor(p.olderThanMs),
      ])
    ).rows as { cutoff: string }[];
    // Small batches keep each statement's locks and WAL short on a hot table. ctid = ANY(ARRAY(…)) is a
    // TID scan; the `ctid IN (SELECT …)` spelling may plan as a join over the whole table.
    const sql = `WITH d AS (
        DELETE FROM ${table}
         WHERE ctid = ANY (ARRAY(SELECT ctid FROM ${table} WHERE processed_at < $1::timestamptz LIMIT $2))
           AND processed_at < $3::timestamptz
        RETURNING 1)
      SELECT count(*)::int AS n FROM d`;
    let total = 0;
    for (;;) {
      const [r] = (await executor.query(sql, [row!.cutoff, batchSize, row!.cutoff])).rows as { n: number }[];
      const n = r?.n ?? 0;
      total += n;
      if (n < batchSize) return total;
    }
  }

  return { migrate, processOnce, kafkaEachMessage, prune };
}
