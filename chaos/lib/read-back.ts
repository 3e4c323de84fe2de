/**
 * Reads topics back with a consumer of its own (its own group, from the beginning, through the
 * brokers' INTERNAL listener so no fault proxy is in the way): every record up to the high
 * watermarks at the time of the call, in (topic, partition, offset) order.
 */
import type { Kafka } from 'kafkajs';
import { TopicReader, tp } from '../../test/support/topic-reader.ts';

export interface BackRecord {
  topic: string;
  partition: number;
  offset: number;
  key: string | null;
  value: Buffer | null;
  /** The record's timestamp (ms): the relay sets the row's created_at. */
  timestamp: number;
}

export async function readBack(kafka: Kafka, topics: string[], idleMs = 60_000): Promise<BackRecord[]> {
  const admin = kafka.admin();
  await admin.connect();
  const high = new Map<string, number>();
  try {
    for (const t of topics) {
      for (const o of await admin.fetchTopicOffsets(t)) high.set(tp(t, o.partition), Number(o.high));
    }
  } finally {
    await admin.disconnect().catch(() => {});
  }
  if ([...high.values()].every((h) => h === 0)) return [];
  // The shared reader replaces a consumer that stalls (after a broker restart) and waits as long
  // as records keep arriving: a chaos run reads back right after its faults.
  const reader = new TopicReader(kafka, topics, 'chaos-read-back');
  try {
    return (await reader.readUpTo(high, { idleMs })).map(({ topic, partition, message: m }) => ({
      topic,
      partition,
      offset: Number(m.offset),
      key: m.key?.toString() ?? null,
      value: m.value,
      timestamp: Number(m.timestamp),
    }));
  } finally {
    await reader.stop();
  }
}

/** (key, seq) of records whose value is the writer's JSON; others are skipped. */
export function keySeqs(records: readonly BackRecord[]): { key: string; seq: number }[] {
  const out: { key: string; seq: number }[] = [];
  for (const r of records) {
    if (r.key === null || r.value === null) continue;
    try {
      const v = JSON.parse(r.value.toString()) as { seq?: unknown };
      if (typeof v.seq === 'number') out.push({ key: r.key, seq: v.seq });
    } catch {
      // not one of ours
    }
  }
  return out;
}
