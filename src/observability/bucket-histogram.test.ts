import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { BucketHistogram } from './bucket-histogram.ts';

const BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** The same observations into prom-client's Histogram and a BucketHistogram, each in its own registry. */
function both(contentType?: string) {
  const a = new Registry();
  const b = new Registry();
  if (contentType) {
    a.setContentType(contentType as never);
    b.setContentType(contentType as never);
  }
  const spec = { name: 'outbox_lag_seconds', help: 'Lag.', buckets: BUCKETS };
  return {
    theirs: new Histogram({ ...spec, registers: [a] }),
    ours: new BucketHistogram({ ...spec, registers: [b] }),
    a,
    b,
  };
}

describe('BucketHistogram', () => {
  it('exposes what prom-client exposes for the same observations (text, OpenMetrics, default labels, JSON)', async () => {
    for (const contentType of [undefined, Registry.OPENMETRICS_CONTENT_TYPE]) {
      const { theirs, ours, a, b } = both(contentType);
      // Dyadic values: the sums are exact however they are added up.
      const values = [0, 0.0078125, 0.015625, 0.0625, 0.5, 1, 2.5, 299.5, 300, 301, 4096];
      let seed = 3;
      for (let n = 0; n < 500; n++) {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        const v = values[(seed >>> 8) % values.length]!;
        const times = 1 + ((seed >>> 4) % 4);
        for (let k = 0; k < times; k++) theirs.observe(v);
        ours.observe(v, times);
      }
      expect(await b.metrics()).toBe(await a.metrics());
      a.setDefaultLabels({ instance: 'x' });
      b.setDefaultLabels({ instance: 'x' });
      expect(await b.metrics()).toBe(await a.metrics());
      expect(await b.getMetricsAsJSON()).toEqual(await a.getMetricsAsJSON());
      a.resetMetrics();
      b.resetMetrics();
      expect(await b.metrics()).toBe(await a.metrics());
      theirs.observe(0.5);
      ours.observe(0.5);
      expect(await b.metrics()).toBe(await a.metrics());
    }
  });

  it('refuses a value that is not finite, as prom-client does', () => {
    const { ours } = both();
    expect(() => ours.observe(Number.NaN)).toThrow(TypeError);
  });
});
