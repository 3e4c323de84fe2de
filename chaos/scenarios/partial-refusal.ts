import { randomUUID } from 'node:crypto';
import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * One oversized event (topic Big has max.message.bytes = 1000) in the same transaction — so the
 * same produce request — as events of two other topics and five partitions: the broker stores
 * those and refuses the big one. It must end failed (MESSAGE_TOO_LARGE), everything else
 * delivered, nothing wedged (later events keep flowing; before the fix kafkajs's rolled-back
 * sequence numbers made every resend OUT_OF_ORDER_SEQUENCE_NUMBER, retried for ever).
 */
export const partialRefusal: Scenario = {
  name: 'partial-refusal',
  summary: 'one oversized event among 3,000 of 2 other topics / 5 partitions, same produce request',
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres();
    await env.startKafka();
    await env.createTopic(TOPIC_OF('Small'), 3);
    await env.createTopic(TOPIC_OF('Other'), 2);
    await env.createTopic(TOPIC_OF('Big'), 1, { config: { 'max.message.bytes': '1000' } });
    env.startSampling();
    const relay = env.spawnRelay([
      ...['--max-attempts', '2', '--failure-backoff-ms', '500', '--failure-backoff-max-ms', '1000'],
      ...['--sweep-interval-ms', '250', '--linger-ms', '20'],
    ]);
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({
      url: env.url,
      type: (k) => (k.startsWith('s') ? 'Small' : 'Other'),
      keys: [...keys('s', 12), ...keys('o', 8)],
    });
    const rnd = rng(7);
    const writing = w.run(3000, 140, 10, rnd);
    await sleep(6000);
    const big = {
      id: randomUUID(),
      type: 'Big',
      key: 'big',
      payload: JSON.stringify({ pad: 'x'.repeat(5000) }),
    };
    const small = { id: randomUUID(), type: 'Big', key: 'big-ok', payload: '{"fits":true}' };
    await w.writeBatch(30, rnd, [big]);
    await sleep(2000);
    await w.writeBatch(5, rnd, [small]);
    env.log('oversized event written (with 30 others in its transaction)');
    await writing;
    const checks: string[] = [];
    const out = await drainAndRead(env, [w], [TOPIC_OF('Small'), TOPIC_OF('Other')], checks);
    const rows = (
      await env.db.query<{ event_id: string; status: string; last_error: string | null }>(
        `SELECT event_id::text, status, last_error FROM ${env.statusTable} WHERE event_id = ANY($1::uuid[])`,
        [[big.id, small.id]],
      )
    ).rows;
    const bigRow = rows.find((r) => r.event_id === big.id);
    const smallRow = rows.find((r) => r.event_id === small.id);
    if (
      !bigRow ||
      !['failed', 'dead'].includes(bigRow.status) ||
      !/too.?large/i.test(bigRow.last_error ?? '')
    )
      checks.push(
        `oversized event ended ${bigRow?.status} (${bigRow?.last_error ?? 'no reason'}), expected failed/dead: too large`,
      );
    if (smallRow?.status !== 'published')
      checks.push(`the small event of topic Big ended ${smallRow?.status}`);
    const others = await env.statusCounts(`aggregate_type <> 'Big'`);
    if (Object.keys(others).some((s) => s !== 'published'))
      checks.push(`events of the other topics: ${JSON.stringify(others)}`);
    if (!alive(relay)) checks.push('the relay exited');
    await w.close();
    return {
      ...out,
      checks,
      notes: [`oversized event: ${bigRow?.status} — ${(bigRow?.last_error ?? '').slice(0, 140)}`],
    };
  },
};
