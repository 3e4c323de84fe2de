import { describe, expect, it } from 'vitest';
import { ErrorCode, RelayError } from '../errors.ts';
import { silentLogger } from '../observability/logger.ts';
import { RelayMetrics } from '../observability/metrics.ts';
import { OutageLog } from '../retry/outage-log.ts';
import type { Sink } from '../sinks/sink.ts';
import { type Component, Components, SinkComponent } from './components.ts';

function recording(names: string[], calls: string[], fail?: string): Component[] {
  return names.map((name) => ({
    name,
    start: async () => {
      calls.push(`start ${name}`);
      if (name === fail) throw new Error(`${name} failed`);
    },
    stop: async () => {
      calls.push(`stop ${name}`);
      if (name === 'b') throw new Error('b stop failed');
    },
  }));
}

describe('the relay components', () => {
  it('start in order every round and stop once, in reverse, even when one stop fails', async () => {
    const calls: string[] = [];
    const c = new Components(recording(['a', 'b', 'c'], calls), silentLogger());
    await c.start(() => false);
    await c.start(() => false);
    await c.stop();
    expect(calls).toEqual([
      'start a',
      'start b',
      'start c',
      'start a',
      'start b',
      'start c',
      'stop c',
      'stop b',
      'stop a',
    ]);
  });

  it('a round ends at a failed start or when interrupted; every component stops once at the end', async () => {
    const calls: string[] = [];
    const c = new Components(recording(['a', 'b', 'c'], calls, 'b'), silentLogger());
    await expect(c.start(() => false)).rejects.toThrow('b failed');
    await c.stop();
    await c.stop();
    expect(calls).toEqual(['start a', 'start b', 'stop c', 'stop b', 'stop a']);

    const calls2: string[] = [];
    const d = new Components(recording(['a', 'b', 'c'], calls2), silentLogger());
    await d.start(() => calls2.length >= 1);
    expect(calls2).toEqual(['start a']);
  });
});

/** A sink whose first `hangs` starts never settle (a client waiting on a frozen broker). */
function hangingSink(hangs: number) {
  const calls: string[] = [];
  let starts = 0;
  const sink: Sink = {
    name: 'kafka',
    start: () => {
      calls.push('start');
      return starts++ < hangs ? new Promise<void>(() => {}) : Promise.resolve();
    },
    abandonStart: () => {
      calls.push('abandonStart');
    },
    publish: async () => {},
    classify: (e) => ({ class: 'transient', reason: 'UNKNOWN', message: String(e) }),
    stop: async () => {
      calls.push('stop');
    },
  };
  return { sink, calls };
}

describe('the sink component', () => {
  it('a start past --sink-start-timeout-ms fails retriably (broker outage), abandons the start, and the next round starts again', async () => {
    const { sink, calls } = hangingSink(1);
    const metrics = new RelayMetrics();
    const c = new SinkComponent(sink, new OutageLog(silentLogger()), metrics, 100);
    const err = await c.start().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RelayError);
    const e = err as RelayError;
    expect(e.code).toBe(ErrorCode.BROKER_UNAVAILABLE);
    expect(e.retriable).toBe(true);
    expect(e.message).toContain('kafka sink did not start within 100 ms');
    expect(e.message).toContain('--sink-start-timeout-ms');
    expect(calls).toEqual(['start', 'abandonStart']);
    await c.start();
    await c.start(); // started once
    await c.stop();
    expect(calls).toEqual(['start', 'abandonStart', 'start', 'stop']);
  });

  it('a sink without abandonStart: the start is left to settle by itself, the message says no client was dropped', async () => {
    const { sink } = hangingSink(1);
    delete sink.abandonStart;
    const c = new SinkComponent(sink, new OutageLog(silentLogger()), new RelayMetrics(), 50);
    await expect(c.start()).rejects.toThrow(
      'the kafka sink did not start within 50 ms (--sink-start-timeout-ms): it is started again after the back-off',
    );
  });

  it('a start that fails before the timeout is a broker outage, not abandoned', async () => {
    const calls: string[] = [];
    const { sink } = hangingSink(0);
    sink.start = async () => {
      calls.push('start');
      throw new Error('Broker not connected');
    };
    sink.abandonStart = () => calls.push('abandonStart');
    const c = new SinkComponent(sink, new OutageLog(silentLogger()), new RelayMetrics(), 10_000);
    await expect(c.start()).rejects.toThrow(
      'cannot start the kafka sink: UNKNOWN: Error: Broker not connected',
    );
    expect(calls).toEqual(['start']);
  });
});
