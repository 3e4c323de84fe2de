/** One outbox row as decoded from the replication stream. */
export interface OutboxEvent {
  /** outbox.id (bigint), kept as text: it may exceed 2^53. */
  id: string;
  eventId: string;
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  /** null is a tombstone. */
  payload: Buffer | null;
  contentType: string;
  headers: Record<string, unknown>;
  traceparent: string | null;
  createdAt: Date;
  /** Commit LSN of the transaction that inserted the row (an Lsn: replication/lsn.ts). */
  lsn: bigint;
  /** Commit time of that transaction (ms since epoch), for end-to-end lag. */
  commitTimeMs: number;
  /**
   * The inserting transaction's id (32 bits, from pgoutput's BEGIN); 0 when unknown (a row read
   * back from the table). Tells "not visible yet" from "gone" when an outcome matches no row.
   */
  xid: number;
}

/** A message ready for a sink. */
export interface OutboundMessage {
  topic: string;
  key: string;
  value: Buffer | null;
  headers: Record<string, string>;
  /** ms since epoch (the row's created_at). */
  timestamp: number;
  event: OutboxEvent;
  /** Approximate size, for the in-flight byte cap. */
  bytes: number;
}
