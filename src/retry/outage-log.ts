import type { Logger } from '../observability/logger.ts';

/**
 * Logs each outage of a dependency once, with its cause, and its end — not every retry.
 * Retries in between go to debug.
 */
export class OutageLog {
  readonly #log: Logger;
  readonly #since = new Map<string, { at: number; attempts: number }>();
  #last: { dependency: string; reason: string; message: string; at: number } | null = null;

  constructor(log: Logger) {
    this.#log = log;
  }

  failed(dependency: string, reason: string, message: string, fields: Record<string, unknown> = {}): void {
    this.#last = { dependency, reason, message, at: Date.now() };
    const o = this.#since.get(dependency);
    if (o) {
      o.attempts++;
      this.#log.debug(
        { dependency, reason, err: message, ...fields },
        `${dependency} still unavailable, retrying`,
      );
      return;
    }
    this.#since.set(dependency, { at: Date.now(), attempts: 1 });
    this.#log.warn(
      { dependency, reason, err: message, ...fields },
      `${dependency} unavailable: ${message}; retrying with back-off`,
    );
  }

  recovered(dependency: string): void {
    const o = this.#since.get(dependency);
    if (!o) return;
    this.#since.delete(dependency);
    this.#log.info(
      { dependency, outageSeconds: Math.round((Date.now() - o.at) / 100) / 10, attempts: o.attempts },
      `${dependency} available again`,
    );
  }

  /** The most recent failure of any dependency (kept after recovery: `status` shows the last error). */
  get lastFailure(): { dependency: string; reason: string; message: string; at: number } | null {
    return this.#last;
  }

  isDown(dependency: string): boolean {
    return this.#since.has(dependency);
  }
}
