import { SqlState } from '../store/pg-errors.ts';
import { OutboxTransactionError } from './errors.ts';

/**
 * What the SDK needs from a database handle: run one statement with `$1`-style parameters and return
 * its rows. A pg Client or PoolClient is one as is; for Knex, Drizzle or Kysely wrap their transaction
 * object in a few lines (docs/sdk.md). The SDK's statements use each `$n` exactly once, in increasing
 * order, so an adapter for `?`-placeholder APIs may replace every `$n` by `?`.
 */
export interface SqlExecutor {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  /**
   * Whether the handle's connection is inside an open transaction block. Optional: without it the
   * SDK asks pg clients' protocol state, and otherwise probes with a SAVEPOINT (one extra round trip).
   */
  inTransaction?: () => boolean;
}

export type TxState = 'idle' | 'in-transaction' | 'failed' | 'unknown';

/**
 * For node-postgres clients: the transaction status byte of the last ReadyForQuery message
 * ('I' idle, 'T' in a transaction block, 'E' in a failed one). pg ≥ 8.13 exposes it as
 * getTransactionStatus() (not in @types/pg); older ones keep it in `_txStatus`. Anything else: unknown.
 * It describes the connection as of the last ReadyForQuery: a BEGIN still queued reads 'I', and since pg
 * rejects a failed query before it reads the ReadyForQuery that follows, a just-caught error may still read 'T'.
 */
export function protocolTxState(executor: object): TxState {
  const c = executor as { getTransactionStatus?: () => unknown; _txStatus?: unknown };
  const status = typeof c.getTransactionStatus === 'function' ? c.getTransactionStatus() : c._txStatus;
  switch (status) {
    case 'I':
      return 'idle';
    case 'T':
      return 'in-transaction';
    case 'E':
      return 'failed';
    default:
      return 'unknown';
  }
}

const NO_ACTIVE_SQL_TRANSACTION = SqlState.NO_ACTIVE_SQL_TRANSACTION;
export const IN_FAILED_SQL_TRANSACTION = SqlState.IN_FAILED_SQL_TRANSACTION;

export const ABORTED_FIX = 'Fix: ROLLBACK and retry the whole unit of work.';

/** SQLSTATE of a driver error, also when an ORM wrapped it (Drizzle keeps it in `cause`). */
export function sqlState(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; depth++) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
}

const FIX_NOT_IN_TX =
  'Fix: call it between BEGIN and COMMIT on the same client (or inside your ORM transaction callback, ' +
  'passing the transaction object, not the pool), or create the outbox with { allowAutocommit: true } ' +
  'to write events on their own.';

/**
 * Throws unless `executor` is inside an open, healthy transaction block. Why: an event inserted in
 * autocommit mode commits at once, whether or not the business change it describes commits later,
 * which is exactly the dual-write bug the outbox exists to prevent.
 *
 * Order of evidence: the adapter's own inTransaction() (trusted); a pg client's protocol status 'T'
 * (free); otherwise `SAVEPOINT` — PostgreSQL rejects it outside a transaction block with 25P01, and
 * on a pool every statement may take another connection, so a pool fails it too.
 */
export async function assertInTransaction(executor: SqlExecutor, what: string): Promise<void> {
  if (executor.inTransaction) {
    if (executor.inTransaction()) return;
    throw new OutboxTransactionError(
      `${what} refused: the executor reports no open transaction, so the event would commit on its own. ${FIX_NOT_IN_TX}`,
    );
  }
  if (protocolTxState(executor) === 'in-transaction') return;
  try {
    await executor.query('SAVEPOINT pg_outbox_probe');
  } catch (err) {
    const state = sqlState(err);
    if (state === NO_ACTIVE_SQL_TRANSACTION) {
      throw new OutboxTransactionError(
        `${what} refused: the executor is not in a transaction (a pool, or a client before BEGIN), so the event would commit on its own. ${FIX_NOT_IN_TX}`,
        { cause: err },
      );
    }
    if (state === IN_FAILED_SQL_TRANSACTION) {
      throw new OutboxTransactionError(
        `${what} refused: the transaction is aborted by an earlier error. ${ABORTED_FIX}`,
        { cause: err },
      );
    }
    throw err;
  }
  await executor.query('RELEASE SAVEPOINT pg_outbox_probe');
}
