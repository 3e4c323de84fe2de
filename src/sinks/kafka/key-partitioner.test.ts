import { Partitioners, type PartitionMetadata } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { CachedDefaultPartitioner } from './key-partitioner.ts';

const meta = (n: number, leaderless: number[] = []): PartitionMetadata[] =>
  Array.from({ length: n }, (_, i) => ({
    partitionId: i,
    leader: leaderless.includes(i) ? -1 : 0,
    partitionErrorCode: 0,
    replicas: [0],
    isr: [0],
  }));

describe('CachedDefaultPartitioner', () => {
  it("picks kafkajs' default partition for every key and partition count, asked once or many times", () => {
    const ours = CachedDefaultPartitioner();
    const theirs = Partitioners.DefaultPartitioner();
    const keys = [
      '',
      'a',
      'order-1',
      'é€😀',
      'x'.repeat(2048),
      ...Array.from({ length: 3000 }, (_, i) => `agg-${i * 7919}`),
    ];
    for (const n of [1, 2, 3, 7, 12, 100]) {
      const partitionMetadata = meta(n, n > 2 ? [1] : []);
      for (let round = 0; round < 2; round++) {
        for (const key of keys) {
          const args = { topic: 't', partitionMetadata, message: { key, value: null } };
          expect(ours(args)).toBe(theirs(args));
        }
      }
    }
  });

  it('keeps an explicit partition, and leaves keyless and Buffer-keyed messages to kafkajs', () => {
    const ours = CachedDefaultPartitioner();
    const theirs = Partitioners.DefaultPartitioner();
    const partitionMetadata = meta(6);
    expect(ours({ topic: 't', partitionMetadata, message: { key: 'k', value: null, partition: 4 } })).toBe(4);
    const buf = { topic: 't', partitionMetadata, message: { key: Buffer.from('order-9'), value: null } };
    expect(ours(buf)).toBe(theirs(buf));
    const keyless = ours({ topic: 't', partitionMetadata, message: { value: 'v' } });
    expect(keyless).toBeGreaterThanOrEqual(0);
    expect(keyless).toBeLessThan(6);
  });

  it('stays right past its memory bound', () => {
    const ours = CachedDefaultPartitioner();
    const theirs = Partitioners.DefaultPartitioner();
    const partitionMetadata = meta(5);
    for (let i = 0; i < 25_000; i += 1) {
      const args = { topic: 't', partitionMetadata, message: { key: `k${i % 12_000}`, value: null } };
      expect(ours(args)).toBe(theirs(args));
    }
  });
});
