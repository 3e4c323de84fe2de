import { describe, expect, it } from 'vitest';
import { classifyKafkaError } from './kafka-errors.ts';
import { MissingTopics } from './missing-topics.ts';

type Verdict = 'ok' | 'missing' | 'unauthorized' | 'unreachable';

function probed(answers: Record<string, Verdict | 'throw'>, opts: { probeFirst?: boolean } = {}) {
  const asked: string[] = [];
  const clock = { now: 1_000_000 };
  const m = new MissingTopics(
    async (t) => {
      asked.push(t);
      const a = answers[t] ?? 'missing';
      if (a === 'throw') throw new Error('connection refused');
      return a;
    },
    { recheckMs: 1000, now: () => clock.now, ...opts },
  );
  return { m, asked, answers, clock };
}

const batch = (...topics: string[]) => topics.map((topic) => ({ topic }));

describe('MissingTopics', () => {
  it('remembers a topic only when its own probe says missing', async () => {
    const { m } = probed({ a: 'missing', b: 'ok', c: 'throw' });
    expect(await m.confirm('a')).toBe(true);
    expect(await m.confirm('b')).toBe(false);
    expect(await m.confirm('c')).toBe(false);
    expect([m.has('a'), m.has('b'), m.has('c')]).toEqual([true, false, false]);
  });

  it('asks about a topic once before its first send: present — never again; missing — refused at once', async () => {
    const { m, asked } = probed({ here: 'ok', gone: 'missing' });
    expect(m.needsCheck(batch('here'))).toBe(true);
    expect(await m.refusal(['here'])).toBeNull();
    expect(m.needsCheck(batch('here'))).toBe(false); // the usual path: no probe, no await
    expect(await m.refusal(['here'])).toBeNull();
    expect(asked).toEqual(['here']);

    const e = await m.refusal(['here', 'gone']);
    expect(e?.message).toMatch(/\bgone\b.*missing since/);
    expect(e?.topic).toBe('gone');
    expect(classifyKafkaError(e)).toMatchObject({
      class: 'permanent',
      reason: 'UNKNOWN_TOPIC_OR_PARTITION',
      destinationWide: true,
    });
    expect([m.has('gone'), m.foundBeforeSend, m.refusedFast]).toEqual([true, 1, 1]);
    expect(asked).toEqual(['here', 'gone']);
    // While one topic is missing, the batches of the others stay on the usual path.
    expect([m.needsCheck(batch('here')), m.needsCheck(batch('here', 'gone'))]).toEqual([false, true]);
  });

  it('a topic the probe could not judge is sent (kafkajs decides) and asked about again until a send went through', async () => {
    const { m, asked } = probed({ u: 'unauthorized', x: 'throw' });
    expect(await m.refusal(['u', 'x'])).toBeNull();
    expect(await m.refusal(['u', 'x'])).toBeNull();
    expect(asked).toEqual(['u', 'x', 'u', 'x']);
    expect(m.size).toBe(0);
    m.sent(['u', 'x']);
    expect(m.needsCheck(batch('u', 'x'))).toBe(false);
  });

  it("the stream's attempts: a remembered topic is refused without a request, asked about again at most once per recheck interval", async () => {
    const { m, asked, answers, clock } = probed({ t: 'missing' });
    expect(await m.refusal(['t'], true)).not.toBeNull(); // found before its first send
    clock.now += 999;
    for (let i = 0; i < 5; i++) expect(await m.refusal(['t'], true)).not.toBeNull();
    expect(asked).toEqual(['t']);
    clock.now += 1;
    expect(await m.refusal(['t'], true)).not.toBeNull(); // asked again: still missing
    expect(asked).toEqual(['t', 't']);
    expect(await m.refusal(['t'], true)).not.toBeNull();
    expect(asked).toEqual(['t', 't']);
    answers.t = 'ok';
    clock.now += 1000;
    expect(await m.refusal(['t'], true)).toBeNull(); // created meanwhile: forgotten, and present
    expect([m.has('t'), m.needsCheck(batch('t'))]).toEqual([false, false]);
    expect(m.refusedFast).toBe(8);
  });

  it("a sweeper's retry always asks: a topic created or a broker lost within the second is not refused", async () => {
    const { m, asked, answers } = probed({ t: 'missing', u: 'missing' });
    await m.confirm('t');
    await m.confirm('u');
    expect(await m.refusal(['t'])).not.toBeNull();
    answers.t = 'ok';
    expect(await m.refusal(['t'])).toBeNull();
    answers.u = 'unreachable';
    expect(await m.refusal(['u'])).toBeNull();
    expect(asked).toEqual(['t', 'u', 't', 't', 'u']);
    expect(m.has('u')).toBe(true);
  });

  it('an unreachable broker at a re-check refuses nothing (no attempt burned) and keeps the memory', async () => {
    const { m, answers, clock } = probed({ x: 'missing' });
    await m.confirm('x');
    answers.x = 'throw';
    clock.now += 1000;
    expect(await m.refusal(['x'], true)).toBeNull();
    answers.x = 'unreachable';
    expect(await m.refusal(['x'], true)).toBeNull();
    expect(m.has('x')).toBe(true);
    expect(m.refusedFast).toBe(0);
  });

  it('a topic refused as missing after it was present is remembered again; probeFirst off asks nothing before a send', async () => {
    const { m, answers } = probed({ t: 'ok' });
    await m.refusal(['t']);
    answers.t = 'missing';
    expect(await m.confirm('t')).toBe(true);
    expect(m.needsCheck(batch('t'))).toBe(true);

    const off = probed({}, { probeFirst: false });
    expect(off.m.needsCheck(batch('a'))).toBe(false);
    expect(await off.m.refusal(['a'])).toBeNull();
    expect(off.asked).toEqual([]);
    await off.m.confirm('b');
    expect([off.m.needsCheck(batch('a')), off.m.needsCheck(batch('a', 'b'))]).toEqual([false, true]);
  });
});
