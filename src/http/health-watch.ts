import type pg from 'pg';
import type { Config } from '../config/load.ts';
import { errorMessage } from '../errors.ts';
import type { RelayView } from '../observability/health.ts';
import type { Logger } from '../observability/logger.ts';
import type { HealthMetrics } from '../observability/metrics.ts';
import { readStatus } from '../ops/status.ts';
import {
  evaluate,
  HEALTH_VERDICTS,
  type HealthReading,
  PROBLEM_IDS,
  type StatusReport,
  unreadableVerdict,
  type Verdict,
} from '../ops/status-report.ts';
import { createPool } from '../store/pool.ts';

export type { HealthReading };

/** How often the relay's HTTP server reads the status (one connection, the queries of `status`). */
export const HEALTH_EVERY_MS = 15_000;

/**
 * The health verdict of `outbox-relay status`, read by the relay itself every `everyMs` on a
 * connection of its own, and again at once after each of the relay's own state changes
 * (streaming, waiting, standby, stopping, stopped: once the relay-state row says it), so the body
 * of /readyz, the console's overview and the outbox_health metrics show the very same reading,
 * never one from before the relay's latest state, and none of them queries the database per
 * request (a probe stays cheap and never waits on PostgreSQL). The reading is `status`'s: readStatus()
 * then evaluate(), nothing else, except that published rows are not counted (the verdict does
 * not use them; counting them would scan the whole table every 15 s).
 */
export class HealthWatch {
  readonly #config: Config;
  readonly #metrics: HealthMetrics;
  readonly #log: Logger;
  readonly #pool: pg.Pool;
  readonly #timer: NodeJS.Timeout;
  #reading: HealthReading = {
    checkedAt: null,
    report: null,
    verdict: 'unknown',
    healthy: false,
    problems: ['the health verdict has not been read yet'],
    findings: [],
  };
  #inflight: Promise<HealthReading> | null = null;
  /** A reading asked for by a state change, to begin once the change is recorded. */
  #next: Promise<HealthReading> | null = null;
  /** That reading once begun, until it ends: settled() waits for it too. */
  #rereading: Promise<HealthReading> | null = null;
  readonly #unsubscribe: () => void;
  #closed = false;

  constructor(o: {
    config: Config;
    metrics: HealthMetrics;
    log: Logger;
    everyMs?: number;
    /** The relay whose state changes are read at once (RelayView.onStateChange). */
    relay?: Pick<RelayView, 'onStateChange'>;
  }) {
    this.#config = o.config;
    this.#metrics = o.metrics;
    this.#log = o.log;
    this.#pool = createPool({
      connectionString: o.config.databaseUrl,
      max: 1,
      application_name: 'outbox-relay health',
      statement_timeout: 10_000,
      connectionTimeoutMillis: 10_000,
      idleTimeoutMillis: 60_000,
    });
    void this.refresh();
    this.#timer = setInterval(() => void this.refresh(), o.everyMs ?? HEALTH_EVERY_MS);
    this.#timer.unref();
    this.#unsubscribe =
      o.relay?.onStateChange?.((_state, recorded) => void this.rereadAfter(recorded)) ?? (() => {});
  }

  /** The last reading (never waits). */
  get current(): HealthReading {
    return this.#reading;
  }

  /** Reads now (or joins the reading under way) and returns it. */
  refresh(): Promise<HealthReading> {
    this.#inflight ??= this.#read().finally(() => {
      this.#inflight = null;
    });
    return this.#inflight;
  }

  /**
   * A reading that begins after `recorded` settled and after the reading under way (which may
   * have begun before the change): the relay's state change, read as `status` reads it. Changes
   * that come while one is waiting share it.
   */
  rereadAfter(recorded: Promise<unknown>): Promise<HealthReading> {
    const before = this.#inflight;
    this.#next ??= Promise.all([recorded, before])
      .catch(() => {})
      // A reading the timer began meanwhile may predate the record: not joined, waited for.
      .then(() => this.#inflight?.catch(() => {}))
      .then(() => {
        this.#next = null;
        if (this.#closed) return this.#reading;
        const r = this.refresh();
        this.#rereading = r;
        void r
          .finally(() => {
            if (this.#rereading === r) this.#rereading = null;
          })
          .catch(() => {});
        return r;
      });
    return this.#next;
  }

  /**
   * The reading once every state change heard so far is in it (waits only while one is being
   * read: at most one status read).
   */
  async settled(): Promise<HealthReading> {
    // While the state change's reading is under way too: #reading is still the one before it.
    return this.#next ?? this.#rereading ?? this.#reading;
  }

  async #read(): Promise<HealthReading> {
    let reading: HealthReading;
    try {
      const client = await this.#pool.connect();
      try {
        const report = evaluate(await readStatus(client, this.#config, { publishedCount: false }));
        reading = { ...pick(report), report, checkedAt: Date.now() };
      } finally {
        client.release();
      }
    } catch (e) {
      this.#log.debug({ err: errorMessage(e) }, 'health: cannot read the status');
      reading = { ...unreadableVerdict(errorMessage(e)), report: null, checkedAt: Date.now() };
    }
    if (this.#closed) return reading;
    this.#reading = reading;
    for (const v of HEALTH_VERDICTS) this.#metrics.verdict.set({ verdict: v }, v === reading.verdict ? 1 : 0);
    const present = new Set(reading.findings.map((f) => f.id));
    for (const id of PROBLEM_IDS) this.#metrics.problems.set({ problem: id }, present.has(id) ? 1 : 0);
    return reading;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe();
    clearInterval(this.#timer);
    await this.#inflight?.catch(() => {});
    await this.#pool.end().catch(() => {});
  }
}

function pick(r: StatusReport): Verdict {
  return { verdict: r.verdict, healthy: r.healthy, problems: r.problems, findings: r.findings };
}
