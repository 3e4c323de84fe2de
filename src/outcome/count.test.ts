import { describe, expect, it } from 'vitest';
import { outboxEvent } from '../../test/support/outbox-event.ts';
import { silentLogger } from '../observability/logger.ts';
import { RelayMetrics } from '../observability/metrics.ts';
import { countBatch, countSweep } from './count.ts';
import type { BatchItem } from './outcome.ts';

const item = (id: string, topic: string): BatchItem => ({
  message: { topic, key: 'k', value: null, headers: {}, timestamp: 0, bytes: 1, event: outboxEvent({ id }) },
});
const published = async (m: RelayMetrics) =>
  Object.fromEntries((await m.eventsPublished.get()).values.map((v) => [v.labels.topic, v.value]));

describe('counting outcomes (the one place)', () => {
  it('a batch: published by topic, failures by reason, parked only logged', async () => {
    const metrics = new RelayMetrics();
    const d = { metrics, log: silentLogger() };
    const failed = { failed: { class: 'permanent' as const, reason: 'MESSAGE_TOO_LARGE', message: 'x' } };
    countBatch(
      d,
      [item('1', 'a'), item('2', 'a'), item('3', 'b'), item('4', 'a'), item('5', 'a'), item('6', 'a')],
      ['published', 'published', 'published', failed, 'parked', 'published'],
    );
    expect(await published(metrics)).toEqual({ a: 3, b: 1 });
    expect((await metrics.failures.eventsFailed.get()).values[0]).toMatchObject({
      labels: { reason: 'MESSAGE_TOO_LARGE' },
      value: 1,
    });
  });

  it("the sweeper's retries and releases that publish count as published", async () => {
    const metrics = new RelayMetrics();
    const d = { metrics, log: silentLogger() };
    const e = outboxEvent();
    const refused = { class: 'permanent' as const, reason: 'MESSAGE_TOO_LARGE', message: 'x' };
    countSweep(d, e, 'a', 2, 'published');
    countSweep(d, e, 'a', 1, 'released');
    countSweep(d, e, 'a', 3, 'retry', refused);
    countSweep(d, e, 'a', 4, 'dead', refused);
    countSweep(d, e, 'a', 1, 'release-refused', refused);
    expect(await published(metrics)).toEqual({ a: 2 });
    const value = async (c: { get(): Promise<{ values: { value: number }[] }> }) =>
      (await c.get()).values[0]?.value;
    expect(await value(metrics.failures.retries)).toBe(3);
    expect(await value(metrics.failures.retryExhaustions)).toBe(1);
    expect(await value(metrics.failures.eventsFailed)).toBe(1);
  });
});
