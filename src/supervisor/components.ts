import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import type { OutageLog } from '../retry/outage-log.ts';
import type { Sink } from '../sinks/sink.ts';

/**
 * A part of the relay's lifecycle (pg-boss's and PowerSync's model): started in order, stopped in
 * reverse. The relay starts the list again at every round of its loop (after a failure, a standby
 * wait, a lost lock), so `start()` is either idempotent (the pool, the sink: started once) or the
 * round's own work done again (the preflight and lock, the slot, the sync, the recovery, the
 * stream). `stop()` runs once, at the relay's end, for every component, in reverse order: it
 * copes with a start that failed or never came (a standby's lock connection is closed although
 * it never got the lock; a sink that never started is not stopped; a relay stopped before its
 * first round still ends its pool and records 'stopped').
 */
export interface Component {
  readonly name: string;
  start(): Promise<void>;
  stop?(): Promise<void>;
}

export class Components {
  readonly #list: readonly Component[];
  readonly #log: Logger;
  #stopped = false;

  constructor(list: readonly Component[], log: Logger) {
    this.#list = list;
    this.#log = log;
  }

  /**
   * One round: each component's start() in order, until one throws (the error ends the round)
   * or `interrupted` says the round cannot go on (stop requested, the leader lock lost).
   */
  async start(interrupted: () => boolean): Promise<void> {
    for (const c of this.#list) {
      await c.start();
      if (interrupted()) return;
    }
  }

  /** Stops every component, in reverse order, once; one's failure does not skip the others. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const c of [...this.#list].reverse()) {
      if (!c.stop) continue;
      await c.stop().catch((e: unknown) => this.#log.warn({ err: errorMessage(e) }, `${c.name} stop failed`));
    }
  }
}

/**
 * The sink, started once (the first round that gets this far) and stopped at the relay's end. A
 * sink that cannot start is a broker outage (retried), except --kafka-topics verify's verdict.
 */
export class SinkComponent implements Component {
  readonly name = 'sink';
  readonly #sink: Sink;
  readonly #outages: OutageLog;
  readonly #metrics: RelayMetrics;
  #started = false;

  constructor(sink: Sink, outages: OutageLog, metrics: RelayMetrics) {
    this.#sink = sink;
    this.#outages = outages;
    this.#metrics = metrics;
  }

  async start(): Promise<void> {
    if (this.#started) return;
    await this.#sink.start().catch((e) => {
      // --kafka-topics verify found topics missing: the relay's own verdict, it ends the relay (exit 78).
      if (e instanceof RelayError && e.code === ErrorCode.KAFKA_TOPICS_NOT_READY) throw e;
      // E.g. CLUSTER_AUTHORIZATION_FAILED: the principal may not get a producer id. Not
      // about any event: nothing is failed, the relay waits and retries.
      const cls = this.#sink.classify(e);
      throw new RelayError(
        ErrorCode.BROKER_UNAVAILABLE,
        `cannot start the ${this.#sink.name} sink: ${cls.reason}: ${cls.message}`,
        { retriable: true, cause: e },
      );
    });
    this.#started = true;
    this.#outages.recovered('broker');
    this.#metrics.brokerOutage.set(0);
  }

  async stop(): Promise<void> {
    if (this.#started) await this.#sink.stop();
  }
}
