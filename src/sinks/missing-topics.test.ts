import { describe, expect, it } from 'vitest';
import { classifyKafkaError } from './kafka-errors.ts';
import { MissingTopics } from './missing-topics.ts';

describe('MissingTopics', () => {
  it('refuses a remembered topic at once with a permanent, topic-wide UNKNOWN_TOPIC_OR_PARTITION', () => {
    const m = new MissingTopics(async () => 'missing', 60_000);
    expect(m.refusal(['a', 'b'])).toBeNull();
    m.add('b');
    const e = m.refusal(['a', 'b']);
    expect(e?.message).toMatch(/\bb\b.*found missing/);
    expect(classifyKafkaError(e)).toMatchObject({
      class: 'permanent',
      reason: 'UNKNOWN_TOPIC_OR_PARTITION',
      destinationWide: true,
    });
    expect(m.refusedFromMemory).toBe(1);
    m.stop();
  });

  it('forgets a topic only when a probe finds it; an unreachable broker keeps the memory', async () => {
    let answer: 'ok' | 'missing' | 'unreachable' = 'unreachable';
    const asked: string[] = [];
    const m = new MissingTopics(async (t) => {
      asked.push(t);
      if (answer === 'unreachable') throw new Error('connection refused');
      return answer;
    }, 60_000);
    m.add('x');
    await m.probeNow();
    expect(m.has('x')).toBe(true);
    answer = 'missing';
    await m.probeNow();
    expect(m.has('x')).toBe(true);
    answer = 'ok';
    await m.probeNow();
    expect(m.has('x')).toBe(false);
    expect(m.refusal(['x'])).toBeNull();
    expect(asked).toEqual(['x', 'x', 'x']);
  });
});
