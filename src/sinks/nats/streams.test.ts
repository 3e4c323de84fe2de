import { describe, expect, it } from 'vitest';
import {
  isPublishSubject,
  retryHorizonMs,
  streamProblem,
  subjectsOverlap,
  templatePattern,
} from './streams.ts';

const stream = (o: Partial<{ storage: string; duplicateWindowNs: number }> = {}) => ({
  name: 'OUTBOX',
  storage: 'file',
  duplicateWindowNs: 120e9,
  subjects: ['outbox.>'],
  ...o,
});

describe('NATS stream rules', () => {
  it('accepts a file stream whose duplicate window covers the retry horizon', () => {
    expect(retryHorizonMs({ retryMaxMs: 30_000, natsTimeoutMs: 10_000 })).toBe(40_000);
    expect(streamProblem(stream(), 40_000)).toBeNull();
    expect(streamProblem(stream({ duplicateWindowNs: 40e9 }), 40_000)).toBeNull();
  });

  it('refuses memory storage and a short duplicate window, saying how to fix it', () => {
    expect(streamProblem(stream({ storage: 'memory' }), 1)).toMatch(/memory storage.*--storage file/);
    expect(streamProblem(stream({ duplicateWindowNs: 10e9 }), 40_000)).toMatch(
      /duplicate window of 10000 ms, below .* 40000 ms .*--dupe-window 40s/,
    );
  });

  it('tells whether two subject patterns can match one subject', () => {
    expect(subjectsOverlap('outbox.>', 'outbox.event.*')).toBe(true);
    expect(subjectsOverlap('outbox.event.*', 'outbox.event.Order')).toBe(true);
    expect(subjectsOverlap('outbox.event.Order', 'outbox.event.*')).toBe(true);
    expect(subjectsOverlap('outbox.event.Order', 'outbox.event.Customer')).toBe(false);
    expect(subjectsOverlap('outbox.*', 'outbox.event.Order')).toBe(false);
    expect(subjectsOverlap('orders.>', 'outbox.event.*')).toBe(false);
    expect(subjectsOverlap('>', 'a')).toBe(true);
  });

  it('turns a topic template into the pattern of its subjects', () => {
    expect(templatePattern('outbox.event.{aggregate_type}')).toBe('outbox.event.*');
    expect(templatePattern('evt-{aggregate_type}.{event_type}.v1')).toBe('*.*.v1');
    expect(templatePattern('billing.invoices')).toBe('billing.invoices');
  });

  it('knows a publishable subject', () => {
    expect(isPublishSubject('outbox.event.Order')).toBe(true);
    for (const bad of ['', 'a..b', '.a', 'a.', 'a.*', 'a.>', 'a b'])
      expect(isPublishSubject(bad)).toBe(false);
  });
});
