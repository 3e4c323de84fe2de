import { type Kafka, Partitioners } from 'kafkajs';
import { TopicLog, type WholeRead } from './kafka-log-reader.ts';

/**
 * The exactly-once progress record in Kafka (docs/delivery.md): one record per Kafka
 * transaction on a compacted topic, keyed by the relay's transactional id, written in the SAME
 * transaction as the events. Its `published` is the int8multirange text of every outbox id this
 * slot published to Kafka that PostgreSQL's progress record (lifecycle/progress.ts) may not hold
 * yet; `token` names the transaction that wrote it.
 *
 * Reading it back `read_committed` tells, after a crash, a fencing or a commit of unknown
 * outcome, exactly which events Kafka holds: PostgreSQL's record only follows Kafka's commit.
 */
export interface KafkaProgress {
  v: 1;
  /** The relay's transactional id (= the record's key). */
  id: string;
  /** int8multirange text, e.g. '{[1,5),[7,9)}'. */
  published: string;
  /** `<producer instance>:<transaction number>`: which transaction wrote it. */
  token: string;
  /**
   * The database timeline key (store/timeline.ts) the ids were read on: after a promotion they
   * may name other rows of the new primary, so a record of another timeline is never added to
   * PostgreSQL's progress record. Absent in records of relays before it (taken as current).
   */
  timeline?: string;
}

export function encodeProgress(p: KafkaProgress): string {
  return JSON.stringify(p);
}

export function decodeProgress(value: Buffer | null): KafkaProgress | null {
  if (!value) return null;
  try {
    const p = JSON.parse(value.toString('utf8')) as Partial<KafkaProgress>;
    if (p.v !== 1 || typeof p.published !== 'string' || typeof p.token !== 'string') return null;
    return p as KafkaProgress;
  } catch {
    return null;
  }
}

/**
 * Reads the latest committed progress record of one key: its partition directly (TopicLog),
 * scanning back from the last stable offset in growing windows until the key is found (the
 * active segment is not compacted yet).
 *
 * The last stable offset stops at the first record of a transaction still open: another
 * relay's (the topic is shared, one partition), or this relay's own whose commit markers are not
 * written yet (a broker that restarted right after acknowledging a commit writes them once its
 * coordinator has loaded). A read up to it can then miss this relay's newest committed records.
 * `whole`: first wait until every transaction written before the read is decided
 * (TopicLog.decidedBounds), so its record is seen.
 */
export async function readLatestProgress(
  kafka: Kafka,
  topic: string,
  key: string,
  whole?: WholeRead,
): Promise<KafkaProgress | null> {
  const log = await TopicLog.open(kafka, topic);
  try {
    if (log.partitions.length === 0) throw new Error(`the progress topic ${topic} has no partitions`);
    const partition = Partitioners.DefaultPartitioner()({
      topic,
      partitionMetadata: log.partitions as never,
      message: { key, value: null },
    });
    const { earliest, stable } = whole
      ? await log.decidedBounds(partition, whole)
      : await log.bounds(partition);
    let end = stable;
    let window = 64;
    while (end > earliest) {
      const start = Math.max(earliest, end - window);
      let latest: KafkaProgress | null = null;
      await log.scan(partition, start, end, (m) => {
        if (m.key?.toString('utf8') === key) latest = decodeProgress(m.value) ?? latest;
      });
      if (latest) return latest;
      end = start;
      window *= 8;
    }
    return null;
  } finally {
    await log.close();
  }
}
