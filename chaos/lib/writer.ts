/**
 * Writes outbox events (several keys, a seq per key in the payload) through one connection that
 * survives database restarts and terminated backends.
 *
 * An INSERT whose connection dies has an unknown outcome. Each event carries an event_id chosen
 * here, so after an error the writer asks a fresh connection whether the batch committed: yes →
 * it counts as written; no → the same rows (same ids, same seqs) are sent again. So the
 * committed events are known exactly, and each key's seqs are 0, 1, 2 … in commit order.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { KeySeq } from './tally.ts';

export interface WriterOptions {
  url: string;
  /** aggregate_type of every event (→ topic), or per key. */
  type: string | ((key: string) => string);
  keys: string[];
  /** SET synchronous_commit for this session, e.g. 'on' to be held by a synchronous standby. */
  synchronousCommit?: string;
  /** Payload padding, bytes. */
  pad?: number;
}

/** A row written in a batch's transaction but not tracked (e.g. an oversized event). */
export interface ExtraRow {
  id: string;
  type: string;
  key: string;
  payload: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Writer {
  readonly written: KeySeq[] = [];
  /** Errors seen (connection lost, …): each was resolved by the committed-or-not check. */
  errors = 0;
  readonly #o: WriterOptions;
  readonly #nextSeq = new Map<string, number>();
  #client: pg.Client | null = null;
  #stopped = false;

  constructor(o: WriterOptions) {
    this.#o = o;
  }

  async #connect(): Promise<pg.Client> {
    if (this.#client) return this.#client;
    const c = new pg.Client({ connectionString: this.#o.url, application_name: 'chaos-writer' });
    c.on('error', () => {});
    await c.connect();
    if (this.#o.synchronousCommit) await c.query(`SET synchronous_commit = ${this.#o.synchronousCommit}`);
    this.#client = c;
    return c;
  }

  #drop(): void {
    this.#client?.end().catch(() => {});
    this.#client = null;
  }

  /**
   * One transaction of `n` events on random keys (plus `extra` rows, untracked, in the same
   * transaction); returns once it is known to be committed.
   */
  async writeBatch(n: number, rnd: () => number = Math.random, extra: ExtraRow[] = []): Promise<void> {
    const rows: (KeySeq & { id: string })[] = [];
    for (let i = 0; i < n; i++) {
      const key = this.#o.keys[Math.floor(rnd() * this.#o.keys.length)]!;
      const seq = this.#nextSeq.get(key) ?? 0;
      this.#nextSeq.set(key, seq + 1);
      rows.push({ key, seq, id: randomUUID() });
    }
    const pad = this.#o.pad ? 'x'.repeat(this.#o.pad) : '';
    const values: unknown[] = [];
    const typeOf = this.#o.type;
    const all = [
      ...rows.map((r) => ({
        id: r.id,
        type: typeof typeOf === 'string' ? typeOf : typeOf(r.key),
        key: r.key,
        payload: JSON.stringify({ key: r.key, seq: r.seq, pad }),
      })),
      ...extra,
    ];
    const tuples = all.map((r, i) => {
      values.push(r.id, r.type, r.key, r.payload);
      const b = i * 4;
      return `($${b + 1}::uuid, $${b + 2}, $${b + 3}, 'Chaos', convert_to($${b + 4}, 'UTF8'))`;
    });
    const sql = `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ${tuples.join(', ')}`;
    for (let attempt = 0; ; attempt++) {
      try {
        const c = await this.#connect();
        if (attempt > 0) {
          const r = await c.query('SELECT 1 FROM outbox WHERE event_id = $1::uuid', [rows[0]!.id]);
          if (r.rowCount === 1) break; // the earlier attempt committed
        }
        const r = await c.query(sql, values);
        if (r.rowCount !== all.length) throw new Error(`INSERT wrote ${r.rowCount} of ${all.length} rows`);
        break;
      } catch {
        this.errors++;
        this.#drop();
        if (attempt > 120) throw new Error(`writer: no answer from the database after ${attempt} attempts`);
        await sleep(Math.min(100 * (attempt + 1), 1000));
      }
    }
    this.written.push(...rows.map(({ key, seq }) => ({ key, seq })));
  }

  /**
   * Writes `total` events in transactions of 1–`maxBatch` rows, pacing to about `perSecond`,
   * until done or stop().
   */
  async run(total: number, perSecond: number, maxBatch = 10, rnd: () => number = Math.random): Promise<void> {
    const started = Date.now();
    while (this.written.length < total && !this.#stopped) {
      const n = Math.min(total - this.written.length, 1 + Math.floor(rnd() * maxBatch));
      await this.writeBatch(n, rnd);
      const due = started + (this.written.length / perSecond) * 1000;
      if (due > Date.now()) await sleep(due - Date.now());
    }
  }

  stop(): void {
    this.#stopped = true;
  }

  async close(): Promise<void> {
    this.#stopped = true;
    this.#drop();
  }
}

/** Deterministic pseudo-random (a failing run can be replayed with the same seed). */
export function rng(seed: number): () => number {
  return () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}
