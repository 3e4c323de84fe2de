import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import { SqlState, sqlStateOf } from '../store/pg-errors.ts';

/** Every error that ends a replication session is retriable: the next session resumes from the slot. */
export function classifyStreamError(e: unknown): RelayError {
  // object_in_use: the slot is active for another PID (another relay took it).
  if (sqlStateOf(e) === SqlState.OBJECT_IN_USE) {
    return new RelayError(ErrorCode.SLOT_ACTIVE_ELSEWHERE, errorMessage(e), { retriable: true, cause: e });
  }
  // undefined_object: the slot was dropped under us; the next round's openSlot recovers it (supervisor/slot-opener.ts).
  return new RelayError(ErrorCode.DATABASE_UNAVAILABLE, `replication stream failed: ${errorMessage(e)}`, {
    retriable: true,
    cause: e,
  });
}

/**
 * Every status tick asks the server for a reply; a server that sent nothing for
 * --replication-timeout-ms while the socket was read is gone (a host lost without a reset, as
 * at a failover), however long TCP would keep the connection: the session ends, as PostgreSQL's
 * walreceiver does after wal_receiver_timeout. A paused socket is not read: no silence then.
 */
export class SilenceCheck {
  readonly #limitMs: number;
  readonly #statusIntervalMs: number;
  #seen = -1;
  #sinceMs = 0;

  constructor(limitMs: number, statusIntervalMs: number) {
    this.#limitMs = limitMs;
    this.#statusIntervalMs = statusIntervalMs;
  }

  /** On each status tick: the count of messages received so far; an error once the server is silent too long. */
  tick(received: number, paused: boolean): RelayError | null {
    if (this.#limitMs <= 0) return null;
    const now = performance.now();
    if (paused || this.#seen !== received) {
      this.#seen = received;
      this.#sinceMs = now;
      return null;
    }
    if (now - this.#sinceMs < this.#limitMs) return null;
    return new RelayError(
      ErrorCode.DATABASE_UNAVAILABLE,
      `the server sent nothing on the replication connection for ${Math.round((now - this.#sinceMs) / 1000)} s although asked to reply every ${this.#statusIntervalMs / 1000} s (--replication-timeout-ms): the connection is taken as dead`,
      { retriable: true },
    );
  }
}
