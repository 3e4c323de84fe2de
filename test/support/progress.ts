/**
 * A deadline that moves while work moves. On a loaded machine the same wait can take five times
 * as long as on a quiet one, so a wall-clock timeout either flakes or is so long that a real hang
 * costs minutes. Bounding the wait by progress instead fails fast when nothing happens, and never
 * while something still does:
 *
 *   const d = new ProgressDeadline({ idleMs: 30_000, capMs: 180_000 });
 *   while (!done()) { d.note(position()); if (d.expired()) throw new Error(d.why()); … }
 *
 * It expires `idleMs` after the last change of the noted value, or `capMs` after it was created,
 * whichever comes first (the cap catches progress that never ends, e.g. a counter that creeps).
 */
export interface ProgressDeadlineOptions {
  /** Give up after this long without a change of the noted value. */
  idleMs: number;
  /** Give up after this long in all. Default: 6 × idleMs. */
  capMs?: number;
  /** The clock (tests). Default Date.now. */
  now?: () => number;
}

export class ProgressDeadline {
  readonly #idleMs: number;
  readonly #capMs: number;
  readonly #now: () => number;
  readonly #started: number;
  #lastChange: number;
  #last: string | undefined;

  constructor(opts: ProgressDeadlineOptions) {
    this.#idleMs = opts.idleMs;
    this.#capMs = opts.capMs ?? opts.idleMs * 6;
    this.#now = opts.now ?? Date.now;
    this.#started = this.#now();
    this.#lastChange = this.#started;
  }

  /** Records the current progress (any JSON-able value); a change restarts the idle clock. */
  note(progress: unknown): void {
    const key = JSON.stringify(progress);
    if (key !== this.#last) {
      if (this.#last !== undefined) this.#lastChange = this.#now();
      this.#last = key;
    }
  }

  /** Milliseconds since the noted value last changed (or since the start). */
  get idleFor(): number {
    return this.#now() - this.#lastChange;
  }

  /** Milliseconds until it expires unless progress is noted (0: expired). */
  remaining(): number {
    const now = this.#now();
    return Math.max(0, Math.min(this.#lastChange + this.#idleMs, this.#started + this.#capMs) - now);
  }

  expired(): boolean {
    return this.remaining() === 0;
  }

  /** Why it expired, for the error message. */
  why(): string {
    const total = this.#now() - this.#started;
    return total >= this.#capMs
      ? `still moving after the cap of ${this.#capMs} ms`
      : `no progress for ${this.idleFor} ms (after ${total} ms in all)`;
  }
}
