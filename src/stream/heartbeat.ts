import type pg from 'pg';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { sleep } from '../retry/backoff.ts';

/** Prefix of the relay's logical decoding messages. */
export const HEARTBEAT_PREFIX = 'pg-outbox-relay-heartbeat';

/**
 * Optional heartbeat (--heartbeat-interval-ms): every interval, a non-transactional logical
 * decoding message goes into the WAL. The session streams with pgoutput's `messages` option,
 * receives it outside any transaction, and treats it like a keepalive: a settled position,
 * confirmed once everything before it is settled, never published. So the slot advances even
 * when the server sends no keepalive for a long time while other tables churn (idle
 * advancement through keepalives handles most cases; this is the belt to those braces).
 *
 * Runs while its session streams; a failed emit is logged once per streak and retried at the
 * next tick (the heartbeat is an optimisation, never a reason to stop).
 */
export class Heartbeat {
  readonly #db: pg.Pool;
  readonly #intervalMs: number;
  readonly #slot: string;
  readonly #log: Logger;
  readonly #abort = new AbortController();
  #loop: Promise<void> | null = null;

  constructor(db: pg.Pool, intervalMs: number, slot: string, log: Logger) {
    this.#db = db;
    this.#intervalMs = intervalMs;
    this.#slot = slot;
    this.#log = log;
  }

  start(): void {
    if (this.#loop || this.#intervalMs <= 0) return;
    const signal = this.#abort.signal;
    this.#loop = (async () => {
      let failing = false;
      while (!signal.aborted) {
        try {
          await this.beat();
          if (failing) this.#log.info('heartbeat messages are written again');
          failing = false;
        } catch (e) {
          if (!failing) this.#log.warn({ err: errorMessage(e) }, 'heartbeat message failed; retrying');
          failing = true;
        }
        await sleep(this.#intervalMs, signal);
      }
    })();
  }

  /** Writes one heartbeat message; resolves with its LSN. */
  async beat(): Promise<string> {
    const r = await this.#db.query<{ lsn: string }>(
      'SELECT pg_logical_emit_message(false, $1, $2)::text AS lsn',
      [HEARTBEAT_PREFIX, JSON.stringify({ slot: this.#slot, at: new Date().toISOString() })],
    );
    return r.rows[0]!.lsn;
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
  }
}
