import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * Hostile rows (the table's NOT NULL and CHECK constraints dropped, as on a hand-made table)
 * between good ones: the good rows all arrive in order; every hostile row ends recorded —
 * 'failed' or 'dead' with a reason (or 'published', where the contract allows the value) —
 * never 'pending' or looping; the relay process never exits.
 */
interface Hostile {
  label: string;
  /** Must end failed/dead (true) or may also be published (false). */
  mustFail: boolean;
  cols: Record<string, string | null>;
}

const long = (n: number) => 'x'.repeat(n);

function hostileRows(): Hostile[] {
  const h = (label: string, mustFail: boolean, cols: Record<string, string | null>): Hostile => ({
    label,
    mustFail,
    cols: { aggregate_type: 'Good', aggregate_id: `h-${label}`, event_type: 'E', payload: '{}', ...cols },
  });
  return [
    h('null-aggregate-id', true, { aggregate_id: null }),
    h('null-aggregate-type', true, { aggregate_type: null }),
    h('empty-aggregate-type', true, { aggregate_type: '' }),
    h('topic-with-slash', true, { aggregate_type: 'bad/topic' }),
    h('topic-with-space', true, { aggregate_type: 'has space' }),
    h('topic-unicode', true, { aggregate_type: 'Ünïcödé' }),
    h('topic-300-chars', true, { aggregate_type: long(300) }),
    h('topic-missing', true, { aggregate_type: 'NoSuchTopic' }),
    h('null-event-type', false, { event_type: null }),
    h('null-content-type', false, { content_type: null }),
    h('null-payload', false, { payload: null }),
    h('null-headers', false, { headers: null }),
    h('headers-array', false, { headers: '[1, 2, 3]' }),
    h('headers-string', false, { headers: '"just a string"' }),
    h('headers-json-null', false, { headers: 'null' }),
    h('headers-nested', false, { headers: '{"nested": {"a": [1, 2, {"b": null}]}}' }),
    h('headers-empty-name', false, { headers: '{"": "empty name"}' }),
    h('headers-newline-name', false, { headers: '{"a\\nb": "v"}' }),
    h('headers-null-value', false, { headers: '{"n": null, "t": true, "num": 1.5e300}' }),
    h('headers-1000', false, {
      headers: JSON.stringify(Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`h${i}`, `v${i}`]))),
    }),
    h('headers-200kb-value', false, { headers: JSON.stringify({ big: long(200_000) }) }),
    h('traceparent-garbage', false, { traceparent: 'zz-not-a-traceparent-\u0001\u007f' }),
    h('aggregate-id-10kb', false, { aggregate_id: long(10_000) }),
    h('aggregate-id-control-chars', false, { aggregate_id: 'a\u0001\u0007\tb' }),
    h('content-type-absurd', false, { content_type: long(5000) }),
  ];
}

const CASTS: Record<string, string> = { payload: 'bytea', headers: 'jsonb' };

export const hostileRowsScenario: Scenario = {
  name: 'hostile-rows',
  summary:
    '25 kinds of hostile rows (NULL aggregate id/type, invalid topics, absurd headers …) among 1,500 good events',
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres();
    await env.db.query(`ALTER TABLE outbox
      ALTER COLUMN aggregate_type DROP NOT NULL, ALTER COLUMN aggregate_id DROP NOT NULL,
      ALTER COLUMN event_type DROP NOT NULL, ALTER COLUMN content_type DROP NOT NULL,
      ALTER COLUMN headers DROP NOT NULL,
      DROP CONSTRAINT outbox_aggregate_type_not_empty, DROP CONSTRAINT outbox_headers_object`);
    await env.startKafka();
    await env.createTopic(TOPIC_OF('Good'), 3);
    env.startSampling();
    const relay = env.spawnRelay([
      ...['--max-attempts', '3', '--failure-backoff-ms', '200', '--failure-backoff-max-ms', '1000'],
      ...['--sweep-interval-ms', '250'],
    ]);
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({ url: env.url, type: 'Good', keys: keys('g', 10) });
    const writing = w.run(1500, 100, 8, rng(6));
    const hostile = hostileRows().map((x) => ({ ...x, id: randomUUID() }));
    const c = new pg.Client({ connectionString: env.url });
    c.on('error', () => {});
    await c.connect();
    try {
      for (const x of hostile) {
        const names = ['event_id', ...Object.keys(x.cols)];
        const params = [
          x.id,
          ...Object.values(x.cols).map((v, i) =>
            names[i + 1] === 'payload' && v !== null ? Buffer.from(v) : v,
          ),
        ];
        const ph = names.map((n, i) => `$${i + 1}::${n === 'event_id' ? 'uuid' : (CASTS[n] ?? 'text')}`);
        await c.query(`INSERT INTO outbox (${names.join(', ')}) VALUES (${ph.join(', ')})`, params);
        await sleep(300);
      }
    } finally {
      await c.end().catch(() => {});
    }
    await writing;
    const checks: string[] = [];
    // Hostile rows go failed → (sweeper retries) → dead within a few seconds here.
    await env.waitFor(
      `SELECT count(*) = 0 AS ok FROM ${env.statusTable} WHERE status IN ('pending', 'failed')`,
      30_000,
    );
    const out = await drainAndRead(env, [w], [TOPIC_OF('Good')], checks);
    const rows = (
      await env.db.query<{ event_id: string; status: string; last_error: string | null }>(
        `SELECT event_id::text, status, last_error FROM ${env.statusTable} WHERE event_id = ANY($1::uuid[])`,
        [hostile.map((x) => x.id)],
      )
    ).rows;
    const byId = new Map(rows.map((r) => [r.event_id, r]));
    const ends: string[] = [];
    for (const x of hostile) {
      const r = byId.get(x.id);
      const end = r ? r.status : 'missing';
      ends.push(`${x.label}=${end}`);
      const recorded = (end === 'failed' || end === 'dead') && !!r?.last_error;
      if (x.mustFail ? !recorded : !(recorded || end === 'published'))
        checks.push(
          `${x.label}: ended ${end}${r?.last_error ? '' : ' without a reason'} (expected ${x.mustFail ? 'failed/dead with a reason' : 'published, or failed/dead with a reason'})`,
        );
    }
    if (!alive(relay)) checks.push(`the relay exited (${relay.child.exitCode ?? relay.child.signalCode})`);
    if (env.relays.length !== 1) checks.push('more than one relay process');
    await w.close();
    const reasons = rows
      .filter((r) => r.last_error)
      .slice(0, 3)
      .map((r) => r.last_error!.slice(0, 120));
    return {
      ...out,
      checks,
      notes: [`hostile rows: ${ends.join(', ')}`, `sample reasons: ${reasons.join(' | ')}`],
    };
  },
};
