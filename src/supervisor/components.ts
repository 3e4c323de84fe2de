import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import type { OutageLog } from '../retry/outage-log.ts';
import { within } from '../retry/within.ts';
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
 * A start that takes longer than --sink-start-timeout-ms fails the round the same way: the sink
 * drops the clients it may hang on (Sink.abandonStart) and the next round starts it afresh. A
 * start is several requests, each retried by its client (kafkajs: connect, metadata, the producer
 * id; --kafka-topics waits for leaders): against a broker that accepts connections and never
 * answers (frozen), their timeouts add up, and nothing else bounds the round.
 */
export class SinkComponent implements Component {
  readonly name = 'sink';
  readonly #sink: Sink;
  readonly #outages: OutageLog;
  readonly #metrics: RelayMetrics;
  readonly #timeoutMs: number;
  #started = false;

  constructor(sink: Sink, outages: OutageLog, metrics: RelayMetrics, startTimeoutMs: number) {
    this.#sink = sink;
    this.#outages = outages;
    this.#metrics = metrics;
    this.#timeoutMs = startTimeoutMs;
  }

  async start(): Promise<void> {
    if (this.#started) return;
    await this.#bounded().catch((e) => {
      // --kafka-topics verify found topics missing: the relay's own verdict, it ends the relay (exit 78).
      if (e instanceof RelayError && e.code === ErrorCode.KAFKA_TOPICS_NOT_READY) throw e;
      if (e === TIMED_OUT) throw this.#timedOut();
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

  /** The sink's start, or TIMED_OUT after --sink-start-timeout-ms (the start is then abandoned). */
  #bounded(): Promise<void> {
    return within(this.#sink.start(), this.#timeoutMs, () => TIMED_OUT, {
      onTimeout: () => this.#sink.abandonStart?.(),
    });
  }

  #timedOut(): RelayError {
    const name = this.#sink.name;
    return new RelayError(
      ErrorCode.BROKER_UNAVAILABLE,
      `the ${name} sink did not start within ${this.#timeoutMs} ms (--sink-start-timeout-ms): ${this.#sink.abandonStart ? 'its clients were dropped; ' : ''}it is started again after the back-off`,
      {
        retriable: true,
        details: { sink: name, timeoutMs: this.#timeoutMs },
        fix: `check that the ${name} brokers are up and answer (a frozen or overloaded broker accepts connections but does not reply); raise --sink-start-timeout-ms if they are only slow to answer at start.`,
      },
    );
  }

  async stop(): Promise<void> {
    if (this.#started) await this.#sink.stop();
  }
}

/** The rejection of a sink's start past --sink-start-timeout-ms (never an error of the sink). */
const TIMED_OUT = Symbol('sink start timed out');
