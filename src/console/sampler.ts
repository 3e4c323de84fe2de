import type pg from 'pg';
import { errorMessage } from '../errors.ts';
import { type RelayView, readSample } from '../observability/health.ts';
import type { Logger } from '../observability/logger.ts';
import { readSlot } from '../sweeper/slot-watch.ts';
import { History } from './history.ts';

/**
 * The console's sampler: every `everyMs` it reads the relay (its state and two metrics) and the
 * slot, and adds the reading to a History (`spanMs` of it, an hour by default) that the overview
 * draws its charts, its WAL-exhaustion estimate and its publish rate from; it also remembers the
 * relay's last transient error. One sample at a time (each waits for the one before), on the
 * console's own pool; a failed sample is logged at debug and the next tick tries again. Nothing
 * else writes to it: the pages read `history` and `lastRelayError`, and close() stops the timer
 * and waits for the sample in flight.
 */

export interface SamplerOptions {
  relay: RelayView;
  /** The console's pool (never the relay's connections). */
  pool: pg.Pool;
  slot: string;
  log: Logger;
  everyMs: number;
  spanMs: number;
}

type Summed = { get(): Promise<{ values: { value: number; metricName?: string }[] }> };

async function sumOf(m: Summed, suffix = ''): Promise<number> {
  return (await m.get()).values
    .filter((v) => !suffix || v.metricName?.endsWith(suffix))
    .reduce((s, v) => s + v.value, 0);
}

export class Sampler {
  readonly history: History;
  readonly #o: SamplerOptions;
  #lastRelayError: { at: number; text: string } | null = null;
  #sampling: Promise<void>;
  readonly #timer: NodeJS.Timeout;

  constructor(o: SamplerOptions) {
    this.#o = o;
    this.history = new History(o.spanMs, o.everyMs);
    this.#sampling = this.#sample().catch(() => {});
    this.#timer = setInterval(() => {
      this.#sampling = this.#sampling
        .then(() => this.#sample())
        .catch((e) => o.log.debug({ err: errorMessage(e) }, 'console sample failed'));
    }, o.everyMs);
    this.#timer.unref();
  }

  /** The relay's last transient error (its waiting reason) seen by a sample. */
  get lastRelayError(): { at: number; text: string } | null {
    return this.#lastRelayError;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#sampling;
  }

  async #sample(): Promise<void> {
    const o = this.#o;
    const s = await readSample(o.relay);
    if (s.state === 'waiting' && s.waitingReason) this.#lastRelayError = { at: s.at, text: s.waitingReason };
    const slot = await readSlot(o.pool, o.slot).catch(() => null);
    const m = o.relay.metrics;
    this.history.add({
      at: s.at,
      retainedBytes: slot ? slot.retainedBytes : null,
      safeWalSizeBytes: slot?.safeWalSizeBytes ?? null,
      publishedTotal: await sumOf(m.eventsPublished),
      lagSum: await sumOf(m.endToEndLagSeconds, '_sum'),
      lagCount: await sumOf(m.endToEndLagSeconds, '_count'),
    });
  }
}
