import { describe, expect, it } from 'vitest';
import { classifyKafkaError } from './kafka-errors.ts';
import { MissingTopics } from './missing-topics.ts';

type Verdict = 'ok' | 'missing' | 'unauthorized' | 'unreachable';

function probed(answers: Record<string, Verdict | 'throw'>) {
  const asked: string[] = [];
  const m = new MissingTopics(async (t) => {
    asked.push(t);
    const a = answers[t] ?? 'missing';
    if (a === 'throw') throw new Error('connection refused');
    return a;
  });
  return { m, asked, answers };
}

describe('MissingTopics', () => {
  it('remembers a topic only when its own probe says missing', async () => {
    const { m } = probed({ a: 'missing', b: 'ok', c: 'throw' });
    expect(await m.confirm('a')).toBe(true);
    expect(await m.confirm('b')).toBe(false);
    expect(await m.confirm('c')).toBe(false);
    expect([m.has('a'), m.has('b'), m.has('c')]).toEqual([true, false, false]);
  });

  it('refuses a remembered topic still missing with a permanent, topic-wide UNKNOWN_TOPIC_OR_PARTITION', async () => {
    const { m, asked } = probed({ b: 'missing' });
    expect(await m.refusal(['a', 'b'])).toBeNull();
    expect(asked).toEqual([]); // nothing remembered: no request at all
    await m.confirm('b');
    const e = await m.refusal(['a', 'b']);
    expect(e?.message).toMatch(/\bb\b.*missing since/);
    expect(classifyKafkaError(e)).toMatchObject({
      class: 'permanent',
      reason: 'UNKNOWN_TOPIC_OR_PARTITION',
      destinationWide: true,
    });
    expect(m.refusedFast).toBe(1);
  });

  it('an unreachable broker refuses nothing (no attempt burned) and keeps the memory; a topic found is forgotten', async () => {
    const { m, answers } = probed({ x: 'missing' });
    await m.confirm('x');
    answers.x = 'throw';
    expect(await m.refusal(['x'])).toBeNull();
    answers.x = 'unreachable';
    expect(await m.refusal(['x'])).toBeNull();
    expect(m.has('x')).toBe(true);
    answers.x = 'ok';
    expect(await m.refusal(['x'])).toBeNull();
    expect(m.has('x')).toBe(false);
    expect(m.refusedFast).toBe(0);
  });
});
