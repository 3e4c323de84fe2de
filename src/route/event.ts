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
  /**
   * The Debezium preset (compat/debezium/): every column's text by name, as pgoutput sent it; the
   * record is made from these. Absent for the relay's own table.
   */
  columns?: Record<string, string | null>;
}

/** A message ready for a sink. */
export interface OutboundMessage {
  topic: string;
  /**
   * The Debezium preset (Kafka only) may also set a null key, and header values that are null or
   * arrays (a repeated name), which kafkajs writes as such (compat/debezium/route.ts).
   */
  key: string;
  value: Buffer | null;
  headers: Record<string, string>;
  /** Set only by the Debezium preset's `partition` placement; otherwise the key's partition. */
  partition?: number;
  /** ms since epoch (the row's created_at). */
  timestamp: number;
  event: OutboxEvent;
  /** Approximate size, for the in-flight byte cap. */
  bytes: number;
}
