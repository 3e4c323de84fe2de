import type pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import type { RelayView } from '../observability/health.ts';
import { silentLogger } from '../observability/logger.ts';
import { RelayMetrics } from '../observability/metrics.ts';
import { Sampler } from './sampler.ts';

describe('console sampler', () => {
  it('samples the relay and the slot into its history, keeps the last waiting reason; close() waits for the sample in flight', async () => {
    const metrics = new RelayMetrics();
    const relay = {
      state: 'streaming',
      waitingReason: null as string | null,
      confirmedLsn: '0/1' as string | null,
      lastProgressAt: null as number | null,
      metrics,
    } satisfies RelayView as { -readonly [K in keyof RelayView]: RelayView[K] };
    // A database that is down: the slot reads as unknown (null), the sample still counts.
    let slotReads = 0;
    const pool = {
      query: async () => {
        slotReads++;
        throw new Error('connection refused');
      },
    } as unknown as pg.Pool;
    const sampler = new Sampler({ relay, pool, slot: 's', log: silentLogger(), everyMs: 10, spanMs: 60_000 });
    expect(sampler.lastRelayError).toBeNull();
    await vi.waitFor(() => expect(sampler.history.points().length).toBeGreaterThan(0), { timeout: 5_000 });
    metrics.eventsPublished.inc({ topic: 't' }, 5);
    relay.state = 'waiting';
    relay.waitingReason = 'broker down';
    // The next samples see the publications (a rate) and the waiting reason.
    await vi.waitFor(
      () => expect(sampler.history.points().some((p) => (p.publishedPerSecond ?? 0) > 0)).toBe(true),
      { timeout: 5_000 },
    );
    await vi.waitFor(() => expect(sampler.lastRelayError?.text).toBe('broker down'), { timeout: 5_000 });
    expect(sampler.history.points().every((p) => p.retainedBytes === null)).toBe(true);
    expect(slotReads).toBeGreaterThan(1);
    // Back to streaming: the last error is remembered, not cleared.
    relay.state = 'streaming';
    relay.waitingReason = null;
    await sampler.close();
    expect(sampler.lastRelayError?.text).toBe('broker down');
  });
});
