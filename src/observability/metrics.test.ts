import { describe, expect, it } from 'vitest';
import { RelayMetrics } from './metrics.ts';

async function value(m: RelayMetrics, name: string): Promise<number | undefined> {
  return (await m.registry.getSingleMetric(name)?.get())?.values[0]?.value;
}

describe('outbox_exactly_once_* counters', () => {
  it('are 0 without exactly-once, and read the transactional publisher at each scrape with it', async () => {
    const m = new RelayMetrics();
    expect(await value(m, 'outbox_exactly_once_progress_topic_losses_total')).toBe(0);
    const counts = { commits: 3, replacements: 1, progressTopicLosses: 0 };
    m.watchExactlyOnce(() => counts);
    expect(await value(m, 'outbox_exactly_once_commits_total')).toBe(3);
    counts.commits = 10;
    counts.progressTopicLosses = 1;
    expect(await value(m, 'outbox_exactly_once_commits_total')).toBe(10);
    expect(await value(m, 'outbox_exactly_once_producer_replacements_total')).toBe(1);
    expect(await value(m, 'outbox_exactly_once_progress_topic_losses_total')).toBe(1);
    expect(await m.registry.metrics()).toMatch(/^outbox_exactly_once_progress_topic_losses_total 1$/m);
  });
});
