import type { RelayMetrics } from '../observability/metrics.ts';
import type { AckTracker } from '../replication/ack-tracker.ts';
import { type ReplicationConnection, walStartOf } from '../replication/connection.ts';
import type { Lsn } from '../replication/lsn.ts';

/**
 * The standby status updates of one session (design.md §3): the flush position sent is only ever
 * the tracker's confirmable one; the received position is the last WAL position seen. Sent on the
 * status timer (asking for a reply), to answer a keepalive, and when the confirmable position
 * moved — at most once per CONFIRM_INTERVAL_MS.
 */
export class StatusUpdates {
  readonly #tracker: AckTracker;
  readonly #metrics: Pick<RelayMetrics, 'confirmedLsn'>;
  #conn: Pick<ReplicationConnection, 'sendStatus'> | null = null;
  #received: Lsn;
  /** The last XLogData message (its bytes and where its pgoutput message starts), not yet in #received. */
  #lastData: Buffer | null = null;
  #lastStart = 0;
  #lastSentFlush: Lsn = -1n;
  /** performance.now() of the last status update sent; a pending one waits on #timer. */
  #lastStatusAt = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | null = null;

  constructor(tracker: AckTracker, metrics: Pick<RelayMetrics, 'confirmedLsn'>, startLsn: Lsn) {
    this.#tracker = tracker;
    this.#metrics = metrics;
    this.#received = startLsn;
  }

  /** The connection the updates go to, once open. */
  attach(conn: Pick<ReplicationConnection, 'sendStatus'>): void {
    this.#conn = conn;
  }

  /** An XLogData message arrived: its position is read from it only when an update reports it. */
  sawData(data: Buffer, start: number): void {
    this.#lastData = data;
    this.#lastStart = start;
  }

  /** The server's WAL end (a keepalive's). */
  sawServerEnd(walEnd: Lsn): void {
    if (walEnd > this.#received) this.#received = walEnd;
  }

  /**
   * Sends the confirmable position if it moved — at most once per CONFIRM_INTERVAL_MS: a live
   * stream settles a batch per event or two, and a status update per batch was a socket write
   * (and the server's work to read it) per event. A position held back goes out by a timer.
   */
  maybeConfirm(): void {
    if (this.#tracker.confirmable === this.#lastSentFlush || this.#timer) return;
    const wait = this.#lastStatusAt + CONFIRM_INTERVAL_MS - performance.now();
    if (wait <= 0) this.send(false);
    else
      this.#timer = setTimeout(() => {
        this.#timer = null;
        this.maybeConfirm();
      }, wait);
  }

  send(replyRequested: boolean): void {
    const conn = this.#conn;
    if (!conn) return;
    const flush = this.#tracker.confirmable;
    if (this.#lastData) {
      const w = walStartOf(this.#lastData, this.#lastStart);
      if (w > this.#received) this.#received = w;
      this.#lastData = null;
    }
    try {
      conn.sendStatus(this.#received, flush, replyRequested);
    } catch {
      return; // the stream's own error ends the session
    }
    this.#lastStatusAt = performance.now();
    if (flush !== this.#lastSentFlush) {
      this.#lastSentFlush = flush;
      this.#metrics.confirmedLsn.set(Number(flush));
    }
  }

  /** No update held back any longer (the session ends). */
  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

/**
 * The shortest time between two status updates that only move the confirmed position: at 2,000
 * single-row commits/s, one status update per 100 events instead of per event (each is a socket
 * write, and the walsender's work to read it). The slot is confirmed at most this much later; a
 * keepalive asking for a reply, the status timer and the final update of a stop are not held.
 */
export const CONFIRM_INTERVAL_MS = 50;
