import { describe, expect, it } from 'vitest';
import { outboxEvent } from '../../test/support/outbox-event.ts';
import type { Classified } from '../errors.ts';
import { BlockedAggregates } from '../lifecycle/blocked-aggregates.ts';
import { silentLogger } from '../observability/logger.ts';
import { RelayMetrics } from '../observability/metrics.ts';
import { OutageLog } from '../retry/outage-log.ts';
import type { OutboundMessage } from '../route/event.ts';
import { RouteFailure } from '../route/router.ts';
import { decideBatch } from './decide.ts';
import { type BatchItem, type OutcomeDeps, unroutable } from './outcome.ts';

/** A sink that refuses (by `refuse`) or acknowledges each publish, and remembers what it was sent. */
function fakeSink(refuse: (batch: readonly OutboundMessage[]) => Classified | null) {
  const sent: string[][] = [];
  return {
    sent,
    async publish(batch: readonly OutboundMessage[]): Promise<void> {
      sent.push(batch.map((m) => m.event.id));
      const r = refuse(batch);
      if (r) throw Object.assign(new Error(r.message), { classified: r });
    },
    classify: (e: unknown) => (e as { classified: Classified }).classified,
  };
}

function deps(ordering: 'strict' | 'relaxed', sink: OutcomeDeps['sink']): OutcomeDeps {
  const log = silentLogger();
  return {
    config: {
      ordering,
      slot: 's',
      retryInitialMs: 1,
      retryMaxMs: 2,
      failureBackoffMs: 1,
      failureBackoffFactor: 2,
      failureBackoffMaxMs: 2,
    },
    sink,
    store: {} as OutcomeDeps['store'], // deciding writes nothing
    blocked: new BlockedAggregates(),
    log,
    metrics: new RelayMetrics(),
    outages: new OutageLog(log),
  };
}

const item = (id: string, aggregateId: string, topic = 't'): BatchItem => ({
  message: {
    topic,
    key: aggregateId,
    value: null,
    headers: {},
    timestamp: 0,
    bytes: 1,
    event: outboxEvent({ id, aggregateId }),
  },
});
const TOO_LARGE: Classified = { class: 'permanent', reason: 'MESSAGE_TOO_LARGE', message: 'too large' };
const signal = new AbortController().signal;

describe('decideBatch', () => {
  it('strict: finds the refused event one by one, parks the later events of its aggregate, publishes the rest', async () => {
    const sink = fakeSink((b) => (b.some((m) => m.event.id === '1') ? TOO_LARGE : null));
    const d = deps('strict', sink);
    const out = await decideBatch(d, [item('1', 'A'), item('2', 'A'), item('3', 'B')], signal);
    expect(out).toEqual([{ failed: TOO_LARGE }, 'parked', 'published']);
    expect(sink.sent).toEqual([['1', '2', '3'], ['1'], ['3']]);
    expect(d.blocked.has('Order', 'A')).toBe(true);
  });

  it('finds a refused event by halving, not one by one; strict: parks what follows it in its aggregate, in the half sent after', async () => {
    const sink = fakeSink((b) => (b.some((m) => m.event.id === '6') ? TOO_LARGE : null));
    const d = deps('strict', sink);
    const aggs = ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'F'];
    const out = await decideBatch(
      d,
      aggs.map((a, i) => item(String(i + 1), a)),
      signal,
    );
    expect(out).toEqual([
      'published',
      'published',
      'published',
      'published',
      'published',
      { failed: TOO_LARGE },
      'published',
      'parked',
    ]);
    expect(sink.sent).toEqual([
      ['1', '2', '3', '4', '5', '6', '7', '8'],
      ['1', '2', '3', '4'],
      ['5', '6', '7', '8'],
      ['5', '6'],
      ['5'],
      ['6'],
      ['7'],
    ]);
    // Relaxed: the same search, and the later event of the failed aggregate is published.
    const relaxedSink = fakeSink((b) => (b.some((m) => m.event.id === '6') ? TOO_LARGE : null));
    const relaxed = await decideBatch(
      deps('relaxed', relaxedSink),
      aggs.map((a, i) => item(String(i + 1), a)),
      signal,
    );
    expect(relaxed!.filter((o) => o === 'published')).toHaveLength(7);
    expect(relaxedSink.sent.at(-1)).toEqual(['7', '8']);
  });

  it('two refused events in one half: each found, every other event published once', async () => {
    const bad = new Set(['2', '3']);
    const sink = fakeSink((b) => (b.some((m) => bad.has(m.event.id)) ? TOO_LARGE : null));
    const out = await decideBatch(
      deps('relaxed', sink),
      ['1', '2', '3', '4'].map((id) => item(id, `agg-${id}`)),
      signal,
    );
    expect(out).toEqual(['published', { failed: TOO_LARGE }, { failed: TOO_LARGE }, 'published']);
    const published = sink.sent.filter((b) => !b.some((id) => bad.has(id))).flat();
    expect(published.sort()).toEqual(['1', '4']);
  });

  it('relaxed: the later events of a failed aggregate are published', async () => {
    const sink = fakeSink((b) => (b.some((m) => m.event.id === '1') ? TOO_LARGE : null));
    const out = await decideBatch(deps('relaxed', sink), [item('1', 'A'), item('2', 'A')], signal);
    expect(out).toEqual([{ failed: TOO_LARGE }, 'published']);
  });

  it('a refusal of the topic itself fails every event of a one-topic batch without sending each alone', async () => {
    const missing: Classified = {
      class: 'permanent',
      reason: 'UNKNOWN_TOPIC_OR_PARTITION',
      message: 'no topic',
      destinationWide: true,
    };
    const sink = fakeSink(() => missing);
    const out = await decideBatch(deps('relaxed', sink), [item('1', 'A'), item('2', 'B')], signal);
    expect(out).toEqual([{ failed: missing }, { failed: missing }]);
    expect(sink.sent).toHaveLength(1);
  });

  it("a missing topic in a batch for several topics: each topic's events are sent together, not one by one", async () => {
    const missing: Classified = {
      class: 'permanent',
      reason: 'UNKNOWN_TOPIC_OR_PARTITION',
      message: 'no topic',
      destinationWide: true,
    };
    const sink = fakeSink((b) => (b.some((m) => m.topic === 'gone') ? missing : null));
    const out = await decideBatch(
      deps('strict', sink),
      [item('1', 'A'), item('2', 'M1', 'gone'), item('3', 'B'), item('4', 'M2', 'gone')],
      signal,
    );
    expect(out).toEqual(['published', { failed: missing }, 'published', { failed: missing }]);
    expect(sink.sent).toEqual([
      ['1', '2', '3', '4'],
      ['1', '3'],
      ['2', '4'],
    ]);
  });

  it('an aggregate whose events go to two topics keeps the one-by-one search (strict order)', async () => {
    const missing: Classified = {
      class: 'permanent',
      reason: 'UNKNOWN_TOPIC_OR_PARTITION',
      message: 'no topic',
      destinationWide: true,
    };
    const sink = fakeSink((b) => (b.some((m) => m.topic === 'gone') ? missing : null));
    const d = deps('strict', sink);
    const out = await decideBatch(d, [item('1', 'A', 'gone'), item('2', 'A'), item('3', 'B')], signal);
    expect(out).toEqual([{ failed: missing }, 'parked', 'published']);
    expect(sink.sent).toEqual([['1', '2', '3'], ['1'], ['3']]);
  });

  it("sink-neutral: any sink's destination-wide refusal (NATS NO_STREAM, RabbitMQ NO_EXCHANGE) fails the batch at once, whatever the reason", async () => {
    for (const reason of ['NO_STREAM', 'NO_EXCHANGE', 'ANY_OTHER_SINK_REASON']) {
      const wide: Classified = { class: 'permanent', reason, message: 'refused', destinationWide: true };
      const sink = fakeSink(() => wide);
      const out = await decideBatch(deps('strict', sink), [item('1', 'A'), item('2', 'B')], signal);
      expect(out).toEqual([{ failed: wide }, { failed: wide }]);
      expect(sink.sent).toHaveLength(1);
    }
  });

  it("a Kafka topic reason without destinationWide is decided one event at a time (the sink's table decides, not the name)", async () => {
    const perEvent: Classified = { class: 'permanent', reason: 'UNKNOWN_TOPIC_OR_PARTITION', message: 'x' };
    const sink = fakeSink(() => perEvent);
    await decideBatch(deps('relaxed', sink), [item('1', 'A'), item('2', 'B')], signal);
    expect(sink.sent).toEqual([['1', '2'], ['1'], ['2']]);
  });

  it("the destination is the sink's (destinationOf): a destination-wide refusal of a batch over two destinations is decided event by event", async () => {
    const wide: Classified = {
      class: 'permanent',
      reason: 'NO_EXCHANGE',
      message: 'x',
      destinationWide: true,
    };
    // One topic, two exchanges (a RabbitMQ exchange template with {event_type}, say): only the
    // first exchange is missing.
    const refusing = (m: OutboundMessage) => m.event.id === '1';
    const sink = {
      ...fakeSink((b) => (b.some(refusing) ? wide : null)),
      destinationOf: (m: OutboundMessage) => (refusing(m) ? 'x.missing' : 'x.present'),
    };
    const out = await decideBatch(deps('relaxed', sink), [item('1', 'A'), item('2', 'B')], signal);
    expect(out).toEqual([{ failed: wide }, 'published']);
    expect(sink.sent).toEqual([['1', '2'], ['1'], ['2']]);
  });

  it('an unroutable row fails without being sent; a transient refusal is waited out', async () => {
    let down = 1;
    const sink = fakeSink(() =>
      down-- > 0 ? { class: 'transient', reason: 'REQUEST_TIMED_OUT', message: 'timeout' } : null,
    );
    const d = deps('relaxed', sink);
    const bad = unroutable(outboxEvent({ id: '1' }), new RouteFailure('aggregate_type is empty', 'ROUTE'));
    const out = await decideBatch(d, [bad, item('2', 'B')], signal);
    expect(out).toEqual([
      { failed: { class: 'permanent', reason: 'ROUTE', message: 'aggregate_type is empty' } },
      'published',
    ]);
    expect(sink.sent).toEqual([['2'], ['2']]);
    expect((await d.metrics.brokerOutage.get()).values[0]?.value).toBe(0);
  });

  it('null once aborted while the broker is down', async () => {
    const ac = new AbortController();
    const sink = fakeSink(() => {
      ac.abort();
      return { class: 'transient', reason: 'REQUEST_TIMED_OUT', message: 'timeout' };
    });
    expect(await decideBatch(deps('strict', sink), [item('1', 'A')], ac.signal)).toBeNull();
  });
});
