import { hostname } from 'node:os';
import type pg from 'pg';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { type RelayStateRow, writeRelayState } from '../store/relay-state.ts';

/** How often the row is rewritten when nothing changed (the heartbeat `status` checks). */
export const STATE_HEARTBEAT_MS = 5000;

export interface StateRecorderDeps {
  db: pg.Pool;
  /** Quoted relay-state table (relayStateTable()). */
  stateTable: string;
  slot: string;
  log: Logger;
  /** Only the holder of the leader lock writes: a standby must not overwrite the active relay's row. */
  canWrite: () => boolean;
  /** The relay's current view; `since` and `holder` are the recorder's. */
  view: () => Omit<RelayStateRow, 'since' | 'holder'>;
  heartbeatMs?: number;
}

/**
 * Writes the relay-state row: at once when the state (or the poison position) changed; the
 * detail, the last error and the progress go with the next write, at the latest every
 * heartbeatMs — never per event, never faster than the state changes. One write at a time; a change during a write
 * is written right after it. A failed write is logged once per streak and retried at the next
 * tick: the row is for operators, never a reason to stop relaying.
 */
export class StateRecorder {
  readonly #d: StateRecorderDeps;
  readonly #holder = `${process.pid}@${hostname()}`;
  #since = new Date();
  #lastState: string | null = null;
  #lastKey: string | null = null;
  #lastWriteAt = 0;
  #writing: Promise<void> | null = null;
  #again = false;
  #failing = false;

  constructor(deps: StateRecorderDeps) {
    this.#d = deps;
  }

  /** Call often (on state changes, and on a timer): writes when something changed or the heartbeat is due. */
  tick(): void {
    const v = this.#d.view();
    if (v.state !== this.#lastState) {
      this.#lastState = v.state;
      this.#since = new Date();
    }
    const key = `${v.state}|${v.poisonLsn}`;
    const due = Date.now() - this.#lastWriteAt >= (this.#d.heartbeatMs ?? STATE_HEARTBEAT_MS);
    if (key === this.#lastKey && !due) return;
    if (this.#writing) {
      this.#again = true;
      return;
    }
    this.#writing = this.#write().finally(() => {
      this.#writing = null;
      if (this.#again) {
        this.#again = false;
        this.tick();
      }
    });
  }

  /**
   * Settles once the writes under way (and the one a change during them asked for) are done: the
   * row then says what the relay said before this call (unless the write failed or this relay
   * may not write). Does not write.
   */
  async settled(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  /** Writes the current view now and waits for it (the final `stopping`/`stopped`), at most timeoutMs. */
  async flush(timeoutMs = 2000): Promise<void> {
    const bounded = (p: Promise<void> | null) =>
      Promise.race([p, new Promise<void>((r) => setTimeout(r, timeoutMs).unref())]);
    await bounded(this.#writing);
    this.#lastKey = null;
    this.tick();
    await bounded(this.#writing);
  }

  async #write(): Promise<void> {
    const d = this.#d;
    if (!d.canWrite()) return;
    const v = d.view();
    const key = `${v.state}|${v.poisonLsn}`;
    try {
      await writeRelayState(d.db, d.stateTable, d.slot, { ...v, since: this.#since, holder: this.#holder });
      this.#lastKey = key;
      this.#lastWriteAt = Date.now();
      if (this.#failing) d.log.info('relay state is recorded again');
      this.#failing = false;
    } catch (e) {
      if (!this.#failing)
        d.log.warn(
          { err: errorMessage(e), code: (e as { code?: string }).code },
          'cannot record the relay state (outbox-relay status will show a stale heartbeat); retrying',
        );
      this.#failing = true;
    }
  }
}
