/**
 * Reads topics back with a consumer of its own (its own group, from the beginning, through the
 * brokers' INTERNAL listener so no fault proxy is in the way): every record up to the high
 * watermarks at the time of the call.
 */
import { randomUUID } from 'node:crypto';
import type { Kafka } from 'kafkajs';

export interface BackRecord {
  topic: string;
  partition: number;
  offset: number;
  key: string | null;
  value: Buffer | null;
  /** The record's timestamp (ms): the relay sets the row's created_at. */
  timestamp: number;
}

export async function readBack(kafka: Kafka, topics: string[], timeoutMs = 60_000): Promise<BackRecord[]> {
  const admin = kafka.admin();
  await admin.connect();
  const high = new Map<string, number>();
  try {
    for (const t of topics) {
      for (const o of await admin.fetchTopicOffsets(t)) high.set(`${t}/${o.partition}`, Number(o.high));
    }
  } finally {
    await admin.disconnect().catch(() => {});
  }
  const position = new Map<string, number>();
  const out: BackRecord[] = [];
  const behind = () => [...high].filter(([tp, h]) => h > 0 && (position.get(tp) ?? 0) < h);
  if (behind().length === 0) return [];
  const consumer = kafka.consumer({ groupId: `chaos-read-back-${randomUUID()}`, maxWaitTimeInMs: 200 });
  let crash: Error | null = null;
  consumer.on(consumer.events.CRASH, (e) => {
    if (!e.payload.restart) crash = e.payload.error;
  });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const tp = `${batch.topic}/${batch.partition}`;
        for (const m of batch.messages) {
          const offset = Number(m.offset);
          if (offset < (position.get(tp) ?? 0)) continue; // handed again after a rebalance
          out.push({
            topic: batch.topic,
            partition: batch.partition,
            offset,
            key: m.key?.toString() ?? null,
            value: m.value,
            timestamp: Number(m.timestamp),
          });
          position.set(tp, offset + 1);
        }
      },
    });
    const deadline = Date.now() + timeoutMs;
    while (behind().length > 0) {
      if (crash) throw crash;
      if (Date.now() > deadline) {
        const lag = behind().map(([tp, h]) => `${tp} at ${position.get(tp) ?? 0} of ${h}`);
        throw new Error(`read-back not caught up after ${timeoutMs} ms: ${lag.join(', ')}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await consumer.disconnect().catch(() => {});
  }
  return out
    .filter((r) => r.offset < (high.get(`${r.topic}/${r.partition}`) ?? 0))
    .sort((a, b) =>
      a.topic === b.topic ? a.partition - b.partition || a.offset - b.offset : a.topic < b.topic ? -1 : 1,
    );
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
