/**
 * The exactly-once section of `npm run bench` (issue 22): what `--delivery exactly-once` costs
 * beside at-least-once, on the same broker and backlog.
 *   - Bulk: in every round of the bulk drains, the relay → Kafka drain with --delivery
 *     exactly-once right beside the at-least-once one (their order alternating by round), so
 *     each round's ratio compares drains seconds apart on a loaded machine; the figure is the
 *     median of the rounds' ratios. A first exactly-once drain, not counted, creates the
 *     broker's transaction state topic and the progress topic.
 *   - Live: a short run of each mode in turn, one relay each on a fresh slot, at the live rate.
 *     Ack time here is when a read_committed consumer receives the record, not its LogAppendTime:
 *     a transactional record is appended before its commit and is visible only after it. The
 *     at-least-once run is measured the same way, so the two compare (both include the
 *     consumer's fetch wait, ≤ 20 ms); they do not compare with the main live section.
 * `--delivery-modes at-least-once` skips the section.
 */
import type { Admin, Kafka } from 'kafkajs';
import { kafkaLiveReader, type LiveResult, measureLiveWith } from './live.ts';
import { cpuSeconds } from './proc.ts';
import { startRelay } from './relay.ts';
import { createLogAppendTopic } from './topics.ts';

export const EOS_ARGS = ['--delivery', 'exactly-once'];

export type DeliveryMode = 'alo' | 'eos';
export type EosLive = Record<DeliveryMode, { live: LiveResult; relayCpu: number }>;

/** Each mode's live run on a relay of its own (fresh slot and topic), at-least-once first. */
export async function eosLive(o: {
  kafka: Kafka;
  admin: Admin;
  url: string;
  kafkaArgs: string[];
  rate: number;
  seconds: number;
  createSlot: (slot: string) => Promise<void>;
  dropSlot: (slot: string) => Promise<void>;
  cleanup: (() => Promise<unknown>)[];
}): Promise<EosLive> {
  const out: Partial<EosLive> = {};
  for (const mode of ['alo', 'eos'] as const) {
    const slot = `live_${mode}`;
    const type = `Live${mode === 'eos' ? 'Eos' : 'Alo'}`;
    const topic = `outbox.event.${type}`;
    await o.createSlot(slot);
    await createLogAppendTopic(o.admin, topic);
    const relay = startRelay(o.url, slot, [...o.kafkaArgs, ...(mode === 'eos' ? EOS_ARGS : [])]);
    o.cleanup.push(relay.stop);
    await relay.streaming;
    const cpu0 = cpuSeconds(relay.child.pid!);
    const live = await measureLiveWith(
      kafkaLiveReader(o.kafka, topic, 'receipt'),
      o.url,
      type,
      o.rate,
      o.seconds,
    );
    out[mode] = { live, relayCpu: cpuSeconds(relay.child.pid!) - cpu0 };
    await relay.stop();
    await o.dropSlot(slot);
  }
  return out as EosLive;
}
