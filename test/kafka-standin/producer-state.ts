// Per-partition idempotent-producer bookkeeping, after Kafka's ProducerStateManager/ProducerAppendInfo:
// the last few batches of every producer id are remembered so that a retried batch is answered with
// the offset it got the first time instead of being appended again.
import { KafkaErrorCode } from './errors.ts';

/** Kafka keeps the metadata of the last 5 batches per producer (max.in.flight for idempotence). */
const BATCHES_KEPT = 5;
const INT32_MAX = 2 ** 31 - 1;

interface BatchMeta {
  readonly firstSeq: number;
  readonly lastSeq: number;
  readonly baseOffset: number;
}

interface ProducerEntry {
  epoch: number;
  batches: BatchMeta[];
}

export type SequenceCheck =
  | { kind: 'append' }
  | { kind: 'duplicate'; baseOffset: number }
  | { kind: 'error'; code: number; reason: string };

/** Sequences wrap from INT32_MAX to 0. */
export function lastSequence(firstSeq: number, count: number): number {
  const last = firstSeq + count - 1;
  return last > INT32_MAX ? last - INT32_MAX - 1 : last;
}

function inSequence(lastSeq: number, nextSeq: number): boolean {
  return nextSeq === lastSeq + 1 || (nextSeq === 0 && lastSeq === INT32_MAX);
}

export class ProducerStateTable {
  private readonly entries = new Map<number, ProducerEntry>();

  check(producerId: number, epoch: number, firstSeq: number, count: number): SequenceCheck {
    const entry = this.entries.get(producerId);
    if (entry === undefined) {
      // Like Kafka: with no state for the producer (new, or expired) any sequence starts the history.
      return { kind: 'append' };
    }
    if (epoch < entry.epoch) {
      return {
        kind: 'error',
        code: KafkaErrorCode.INVALID_PRODUCER_EPOCH,
        reason: `epoch ${epoch} is older than ${entry.epoch}`,
      };
    }
    if (epoch > entry.epoch) {
      if (firstSeq !== 0) {
        return {
          kind: 'error',
          code: KafkaErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
          reason: `new epoch ${epoch} must start at sequence 0, got ${firstSeq}`,
        };
      }
      return { kind: 'append' };
    }
    const lastSeq = lastSequence(firstSeq, count);
    const dup = entry.batches.find((b) => b.firstSeq === firstSeq && b.lastSeq === lastSeq);
    if (dup !== undefined) return { kind: 'duplicate', baseOffset: dup.baseOffset };
    const last = entry.batches.at(-1);
    if (last !== undefined && !inSequence(last.lastSeq, firstSeq)) {
      return {
        kind: 'error',
        code: KafkaErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        reason: `expected sequence ${last.lastSeq + 1 > INT32_MAX ? 0 : last.lastSeq + 1}, got ${firstSeq}`,
      };
    }
    return { kind: 'append' };
  }

  /** Call only after `check` answered 'append' and the batch was appended at `baseOffset`. */
  record(producerId: number, epoch: number, firstSeq: number, count: number, baseOffset: number): void {
    let entry = this.entries.get(producerId);
    if (entry === undefined || epoch > entry.epoch) {
      entry = { epoch, batches: [] };
      this.entries.set(producerId, entry);
    }
    entry.batches.push({ firstSeq, lastSeq: lastSequence(firstSeq, count), baseOffset });
    if (entry.batches.length > BATCHES_KEPT) entry.batches.shift();
  }
}
