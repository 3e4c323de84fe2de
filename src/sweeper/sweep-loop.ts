import { errorMessage, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { sleep } from '../retry/backoff.ts';

/**
 * The sweeper's loop (sweeper.ts, over the outbox table or the
 * Debezium preset's side table): one round, then `intervalMs`, until stop(); one round at a time;
 * stop() aborts the wait (and the round, between its steps) and waits for the round in progress.
 * A round that fails is logged and the next one tried — except a RelayError that is not retriable
 * (the slot was invalidated): the loop ends and `onFatal` hears of it.
 */
export interface SweepLoopOptions {
  intervalMs: number;
  log: Logger;
  /** The warning's text when a round fails. */
  failed: string;
  /** Failures already logged where they happened (no second line). */
  quiet?: (e: unknown) => boolean;
  onFatal?: (e: RelayError) => void;
}

export class SweepLoop {
  readonly #round: (signal: AbortSignal) => Promise<unknown>;
  readonly #o: SweepLoopOptions;
  #abort = new AbortController();
  #loop: Promise<void> | null = null;

  constructor(round: (signal: AbortSignal) => Promise<unknown>, o: SweepLoopOptions) {
    this.#round = round;
    this.#o = o;
  }

  start(): void {
    if (this.#loop) return;
    this.#abort = new AbortController();
    const signal = this.#abort.signal;
    this.#loop = (async () => {
      while (!signal.aborted) {
        try {
          await this.#round(signal);
        } catch (e) {
          if (e instanceof RelayError && !e.retriable && this.#o.onFatal) {
            this.#o.onFatal(e);
            return;
          }
          if (!this.#o.quiet?.(e)) this.#o.log.warn({ err: errorMessage(e) }, this.#o.failed);
        }
        await sleep(this.#o.intervalMs, signal).catch(() => {});
      }
    })();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop?.catch(() => {});
    this.#loop = null;
  }
}
