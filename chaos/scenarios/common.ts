/** Pieces every streaming scenario shares: keys, the topic, the final drain and read-back. */
import type { Env } from '../lib/env.ts';
import { keySeqs } from '../lib/read-back.ts';
import type { Outcome } from '../lib/scenario.ts';
import type { Writer } from '../lib/writer.ts';

/**
 * How long a relay may take to reach "streaming from the slot": long, because on a loaded
 * two-core machine a 3-node cluster's first transactional producer waits for the broker to create
 * __transaction_state (seen: ~115 s at load 20 – 35). A relay that exits fails the wait at once;
 * one that streams ends it at once: only a wedge waits it out.
 */
export const START_WAIT_MS = 180_000;

export const TOPIC_OF = (type: string) => `outbox.event.${type}`;

export function keys(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${i}`);
}

/**
 * Waits until no row is pending (bounded by progress: `idleMs` without the pending count moving),
 * then reads `topics` back. A row still pending is a broken promise (wedged or lost on the way),
 * reported as a check.
 */
export async function drainAndRead(
  env: Env,
  writers: Writer[],
  topics: string[],
  checks: string[],
  idleMs = 60_000,
): Promise<Pick<Outcome, 'written' | 'read'>> {
  if (!(await env.waitNothingPending(idleMs))) {
    checks.push(
      `rows still pending, the count unchanged for ${idleMs / 1000} s (or still draining after ${(idleMs * 5) / 1000} s): ${JSON.stringify(await env.statusCounts())}`,
    );
  }
  await env.stopSampling();
  const records = await env.readBack(topics);
  env.log(`read back ${records.length} records from ${topics.join(', ')}`);
  return { written: writers.flatMap((w) => w.written), read: keySeqs(records) };
}
