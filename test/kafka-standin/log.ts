// In-memory partition logs. Batches are kept exactly as produced (one copy, with the broker-assigned
// base offset written in), so Fetch can send them back byte for byte and tests decode them on demand.
import { ProducerStateTable } from './producer-state.ts';
import { BATCH, type BatchHeader, type DecodedRecord, decodeBatch } from './record-batch.ts';

export interface StoredBatch {
  readonly baseOffset: number;
  readonly lastOffset: number;
  readonly recordCount: number;
  readonly maxTimestamp: number;
  readonly producerId: number;
  readonly bytes: Buffer;
  decoded?: DecodedRecord[];
}

export type AppendResult =
  | { kind: 'appended'; baseOffset: number }
  | { kind: 'duplicate'; baseOffset: number }
  | { kind: 'error'; code: number; reason: string };

export class PartitionLog {
  readonly topic: string;
  readonly partition: number;
  readonly batches: StoredBatch[] = [];
  /** Single replica: every append is committed at once, so high watermark == log end offset. */
  highWatermark = 0;
  recordCount = 0;
  sizeBytes = 0;
  private readonly producers = new ProducerStateTable();

  constructor(topic: string, partition: number) {
    this.topic = topic;
    this.partition = partition;
  }

  /** `records` must already have passed validateProducedBatch. */
  append(records: Buffer, header: BatchHeader): AppendResult {
    const idempotent = header.producerId >= 0;
    if (idempotent) {
      const check = this.producers.check(
        header.producerId,
        header.producerEpoch,
        header.baseSequence,
        header.recordCount,
      );
      if (check.kind !== 'append') return check;
    }
    const baseOffset = this.highWatermark;
    // Copy: the request buffer belongs to the connection and may be a view into a larger chunk.
    const bytes = Buffer.allocUnsafeSlow(records.length);
    records.copy(bytes);
    bytes.writeInt32BE(Math.floor(baseOffset / 2 ** 32), BATCH.BASE_OFFSET);
    bytes.writeUInt32BE(baseOffset % 2 ** 32, BATCH.BASE_OFFSET + 4);
    // Leader epoch of our only, never-changing leader. Neither field is covered by the CRC.
    bytes.writeInt32BE(0, BATCH.PARTITION_LEADER_EPOCH);
    this.batches.push({
      baseOffset,
      lastOffset: baseOffset + header.lastOffsetDelta,
      recordCount: header.recordCount,
      maxTimestamp: header.maxTimestamp,
      producerId: header.producerId,
      bytes,
    });
    this.highWatermark = baseOffset + header.lastOffsetDelta + 1;
    this.recordCount += header.recordCount;
    this.sizeBytes += bytes.length;
    if (idempotent) {
      this.producers.record(
        header.producerId,
        header.producerEpoch,
        header.baseSequence,
        header.recordCount,
        baseOffset,
      );
    }
    return { kind: 'appended', baseOffset };
  }

  /** Index of the batch holding `offset`; batches.length when offset is the log end. */
  private batchIndex(offset: number): number {
    let lo = 0;
    let hi = this.batches.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.batches[mid]!.lastOffset < offset) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Whole batches from the one containing `offset`, up to `maxBytes` — except that the first batch is
   * always returned when `mustReturnOne` (KIP-74: a consumer must be able to make progress).
   */
  read(offset: number, maxBytes: number, mustReturnOne: boolean): { chunks: Buffer[]; bytes: number } {
    const chunks: Buffer[] = [];
    let bytes = 0;
    for (let i = this.batchIndex(offset); i < this.batches.length; i++) {
      const b = this.batches[i]!.bytes;
      if (bytes + b.length > maxBytes && !(mustReturnOne && chunks.length === 0)) break;
      chunks.push(b);
      bytes += b.length;
    }
    return { chunks, bytes };
  }

  /** ListOffsets by timestamp: the first record whose timestamp is >= ts. */
  offsetForTimestamp(ts: number): { offset: number; timestamp: number } | null {
    for (const batch of this.batches) {
      if (batch.maxTimestamp < ts) continue;
      for (const rec of decodedRecords(batch)) {
        if (rec.timestamp >= ts) return { offset: rec.offset, timestamp: rec.timestamp };
      }
    }
    return null;
  }
}

export function decodedRecords(batch: StoredBatch): DecodedRecord[] {
  batch.decoded ??= decodeBatch(batch.bytes);
  return batch.decoded;
}

export interface TopicLog {
  readonly name: string;
  readonly partitions: PartitionLog[];
  /** Topic-level max.message.bytes; falls back to the broker setting when undefined. */
  maxMessageBytes: number | undefined;
}

export function newTopicLog(name: string, partitions: number, maxMessageBytes?: number): TopicLog {
  return {
    name,
    partitions: Array.from({ length: partitions }, (_, i) => new PartitionLog(name, i)),
    maxMessageBytes,
  };
}

/** Kafka's rules (Topic.validate): 1-249 chars of [a-zA-Z0-9._-], not "." or "..". */
export function topicNameError(name: string): string | null {
  if (name.length === 0) return 'topic name is empty';
  if (name === '.' || name === '..') return `topic name "${name}" is not allowed`;
  if (name.length > 249) return 'topic name longer than 249 characters';
  if (!/^[a-zA-Z0-9._-]+$/.test(name)) return `topic name "${name}" has characters outside [a-zA-Z0-9._-]`;
  return null;
}
