import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  fastFailureArgs,
  insertEvents,
  migrateDb,
  slotOf,
  spawnCli,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

/**
 * The operator CLI (src/ops/) as real processes against real PostgreSQL, beside a running
 * relay (in-process, strict ordering) publishing to the Kafka stand-in, whose fault injection
 * makes events fail and die.
 */
const db = useTestDatabase();
let kafka: KafkaHarness;
let relay: Relay | null = null;

async function startRelay(): Promise<void> {
  const config = testConfig(db, ['--ordering', 'strict', ...fastFailureArgs(100)], kafka);
  relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
  await waitFor(() => relay!.state === 'streaming', { message: 'relay streaming' });
}

/** `outbox-relay <args> --database-url … --slot …` to completion. */
async function ops(args: string[]) {
  const p = spawnCli([...args, '--database-url', db.url, '--slot', slotOf(db)]);
  const code = await p.exited;
  return { code, out: p.stdout(), err: p.logs() };
}
async function opsJson<T>(args: string[]): Promise<{ code: number | string; json: T; err: string }> {
  const r = await ops([...args, '--json']);
  try {
    return { code: r.code, json: JSON.parse(r.out) as T, err: r.err };
  } catch {
    throw new Error(`not one JSON object (exit ${r.code}):\n${r.out}\n${r.err}`);
  }
}

interface Row {
  id: string;
  status: string;
  attempts: number;
  headers: Record<string, string>;
}
async function rows(ids: string[]): Promise<Row[]> {
  return db.query<Row>(
    // o.id, the bigint: the output column id is text, and "10" sorts before "9".
    'SELECT o.id::text AS id, status, attempts, headers FROM outbox_with_status o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id',
    [ids],
  );
}
const statuses = async (ids: string[]) => (await rows(ids)).map((r) => r.status).join();
const seqs = async (topic: string, key?: string) =>
  (await kafka.readAll(topic))
    .filter((m) => key === undefined || m.key?.toString() === key)
    .map((m) => JSON.parse(m.value!.toString()).seq as number);
const ev = (type: string, id: string, seq: number) => ({
  aggregateType: type,
  aggregateId: id,
  eventType: 'E',
  payload: JSON.stringify({ seq }),
});
/** The database's clock (created_at's), to the millisecond (the CLI's precision), clear of the rows around it. */
async function dbNow(): Promise<string> {
  await new Promise((r) => setTimeout(r, 10));
  const t = (await db.query<{ t: Date }>('SELECT clock_timestamp() AS t'))[0]!.t.toISOString();
  await new Promise((r) => setTimeout(r, 10));
  return t;
}

/**
 * One event refused for good until its topic is fixed (the topic does not exist, auto-creation
 * off); dead after 2 attempts; followers parked. Then the topic is created.
 */
async function deadHeadWithFollowers(type: string): Promise<string[]> {
  const [head] = await insertEvents(db.pool, [ev(type, 'a', 0)]);
  await waitFor(async () => ['failed', 'dead'].includes(await statuses([head!])), {
    message: `${type} head failed`,
  });
  const followers = await insertEvents(db.pool, [ev(type, 'a', 1), ev(type, 'a', 2)]);
  const ids = [head!, ...followers];
  await waitFor(async () => (await statuses(ids)) === 'dead,parked,parked', {
    timeoutMs: 20_000,
    message: async () => `${type}: head dead, followers parked (is ${await statuses(ids)})`,
  });
  await kafka.createTopic(`outbox.event.${type}`, 1);
  return ids;
}

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
  await startRelay();
});

afterAll(async () => {
  await relay?.stop();
  await kafka?.stop();
});

interface StatusJson {
  healthy: boolean;
  problems: string[];
  slot: { exists: boolean; active: boolean; walStatus: string; retainedWalBytes: number; lagBytes: number };
  publication: { ok: boolean; error: string | null };
  counts: Record<string, number>;
  dead: number;
  parkedAggregates: number;
  oldestFailedAgeSeconds: number | null;
}

describe('status', () => {
  it('exits 0 with the slot active and nothing dead; 69 when the publication check fails', async () => {
    await kafka.createTopic('outbox.event.Fine', 1);
    const [f] = await insertEvents(db.pool, [ev('Fine', 'f', 0)]);
    await waitFor(async () => (await statuses([f!])) === 'published');
    const ok = await opsJson<StatusJson>(['status']);
    expect(ok.code).toBe(EXIT.OK);
    expect(ok.json.healthy).toBe(true);
    expect(ok.json.slot).toMatchObject({ exists: true, active: true });
    expect(['reserved', 'extended']).toContain(ok.json.slot.walStatus);
    expect(ok.json.slot.retainedWalBytes).toBeGreaterThan(0);
    expect(ok.json.publication).toEqual({ name: 'outbox_pub', ok: true, error: null });
    expect(ok.json.counts.published).toBe(1);
    expect(ok.json.dead).toBe(0);
    const human = await ops(['status']);
    expect(human.code).toBe(EXIT.OK);
    expect(human.out).toMatch(/slot\s+\S+: active \(pid \d+\)/);
    expect(human.out).toMatch(/events\s+pending 0, published 1, failed 0, dead 0/);
    expect(human.out.trim()).toMatch(/healthy$/);

    const bad = await opsJson<StatusJson>(['status', '--publication', 'no_such_pub']);
    expect(bad.code).toBe(69);
    expect(bad.json.healthy).toBe(false);
    expect(bad.json.publication.error).toMatch(/PUBLICATION_MISSING/);
  });
});

describe('events resend', () => {
  it('makes a dead event arrive and releases its parked followers in order', async () => {
    const [head, f1, f2] = await deadHeadWithFollowers('Resend');
    expect((await rows([head!]))[0]!.attempts).toBe(2);
    // Dead events make status unhealthy, parked aggregates counted.
    const st = await opsJson<StatusJson>(['status']);
    expect(st.code).toBe(69);
    expect(st.json.dead).toBe(1);
    expect(st.json.parkedAggregates).toBe(1);
    expect(st.json.problems.join()).toMatch(/1 dead event/);
    expect(await seqs('outbox.event.Resend')).toEqual([]);

    // Bad input changes nothing: a missing id among good ones, a published one, garbage.
    const missing = await ops(['events', 'resend', head!, '987654']);
    expect(missing.code).toBe(EXIT.USAGE);
    expect(missing.err).toMatch(/no such event in "public"\."outbox": 987654 \(nothing changed\)/);
    const wrongState = await ops(['events', 'resend', f1!]);
    expect(wrongState.code).toBe(EXIT.USAGE);
    expect(wrongState.err).toMatch(new RegExp(`event ${f1} is parked; only failed/dead`));
    expect((await ops(['events', 'resend', 'x1'])).code).toBe(EXIT.USAGE);
    expect((await ops(['events', 'resend'])).code).toBe(EXIT.USAGE);
    expect(await statuses([head!, f1!, f2!])).toBe('dead,parked,parked');

    const r = await ops(['events', 'resend', head!]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/^1 event\(s\) due again now/);
    expect(r.err).toMatch(/"audit":true.*"action":"resend"/);
    expect(r.err).toMatch(/"rows":1/);
    await waitFor(async () => (await statuses([head!, f1!, f2!])) === 'published,published,published', {
      timeoutMs: 20_000,
      message: async () => `resent head and followers published (is ${await statuses([head!, f1!, f2!])})`,
    });
    // attempts kept (2) + the successful one.
    expect((await rows([head!]))[0]!.attempts).toBe(3);
    expect(await seqs('outbox.event.Resend', 'a')).toEqual([0, 1, 2]);
    expect((await ops(['status'])).code).toBe(EXIT.OK);
  });

  it('--filter --reset-attempts resends every matching dead event with its attempts reset', async () => {
    const [head, f1, f2] = await deadHeadWithFollowers('Bulk');
    const none = await opsJson<{ count: number }>([
      'events',
      'resend',
      '--filter',
      '--aggregate-type',
      'NoSuchType',
    ]);
    expect(none.json).toEqual({ action: 'resend', count: 0 });
    const notAllowed = await ops(['events', 'resend', '--filter', '--status', 'parked']);
    expect(notAllowed.code).toBe(EXIT.USAGE);
    expect(notAllowed.err).toMatch(/status "parked" is not allowed here \(allowed: failed, dead\)/);
    const both = await ops(['events', 'resend', head!, '--filter']);
    expect(both.code).toBe(EXIT.USAGE);
    const r = await opsJson<{ count: number }>([
      'events',
      'resend',
      '--filter',
      '--status',
      'dead',
      '--aggregate-type',
      'Bulk',
      '--reset-attempts',
    ]);
    expect(r.json).toEqual({ action: 'resend', count: 1 });
    await waitFor(async () => (await statuses([head!, f1!, f2!])) === 'published,published,published', {
      timeoutMs: 20_000,
    });
    // Reset to 0, then the successful attempt: 1 (kept, it would be 3).
    expect((await rows([head!]))[0]!.attempts).toBe(1);
    expect(await seqs('outbox.event.Bulk', 'a')).toEqual([0, 1, 2]);
  });
});

describe('events discard', () => {
  it('requires --yes, then discards the dead head and releases its parked followers in order', async () => {
    const [head, f1, f2] = await deadHeadWithFollowers('Discard');
    const refused = await ops(['events', 'discard', head!]);
    expect(refused.code).toBe(EXIT.USAGE);
    expect(refused.err).toMatch(/not confirmed.*--yes.*nothing changed/);
    expect(await statuses([head!, f1!, f2!])).toBe('dead,parked,parked');

    const r = await ops(['events', 'discard', head!, '--yes']);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/^1 event\(s\) discarded/);
    expect(r.err).toMatch(/"audit":true.*"action":"discard".*"ids":\["\d+"\].*"rows":1/);
    await waitFor(async () => (await statuses([head!, f1!, f2!])) === 'discarded,published,published', {
      timeoutMs: 20_000,
      message: async () => `followers released (is ${await statuses([head!, f1!, f2!])})`,
    });
    // The discarded head never reaches the topic; the followers arrive in order.
    expect(await seqs('outbox.event.Discard', 'a')).toEqual([1, 2]);
    // The aggregate flows again.
    const [next] = await insertEvents(db.pool, [ev('Discard', 'a', 3)]);
    await waitFor(async () => (await statuses([next!])) === 'published');
    expect(await seqs('outbox.event.Discard', 'a')).toEqual([1, 2, 3]);
    // Discarding it again: it is no longer failed/dead.
    const again = await ops(['events', 'discard', head!, '--yes']);
    expect(again.code).toBe(EXIT.USAGE);
    expect(again.err).toMatch(/is discarded; only failed\/dead/);
  });
});

describe('events resend/discard losing a race', () => {
  it('exits 75 and changes nothing when the UPDATE matches fewer rows than selected', async () => {
    const ids = await deadHeadWithFollowers('Race');
    const [head] = ids;
    // The row changes "meanwhile": a trigger makes the guarded UPDATE skip it, as a row the
    // sweeper updated between the command's selection and its UPDATE would be skipped.
    await db.query(`CREATE FUNCTION race_skip() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF OLD.id = ${head} AND NEW.status IN ('discarded', 'failed') THEN RETURN NULL; END IF; RETURN NEW; END $$`);
    await db.query(
      'CREATE TRIGGER race_skip BEFORE UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION race_skip()',
    );
    try {
      for (const action of ['discard', 'resend']) {
        const r = await ops(['events', action, head!, '--yes']);
        expect(r.code).toBe(EXIT.TEMPFAIL);
        expect(r.err).toMatch(
          new RegExp(`${action} matched 0 of the 1 event\\(s\\) selected.*nothing changed`),
        );
        expect(await statuses(ids)).toBe('dead,parked,parked');
      }
    } finally {
      await db.query('DROP TRIGGER race_skip ON outbox');
      await db.query('DROP FUNCTION race_skip()');
    }
    const r = await ops(['events', 'discard', head!, '--yes']);
    expect(r.code).toBe(EXIT.OK);
    await waitFor(async () => (await statuses(ids)) === 'discarded,published,published', {
      timeoutMs: 20_000,
      message: async () => `followers released (is ${await statuses(ids)})`,
    });
  });
});

describe('events list / count / show', () => {
  let failed: string[] = [];

  /** Waits until the relay recorded them failed (or already dead), then keeps them failed, not due for an hour. */
  async function settleFailed(ids: string[]): Promise<void> {
    // Each refusal of a missing topic costs ~1.4 s of kafkajs metadata retries, and the refused
    // batch is then tried event by event to find which ones are refused: 7 events take 10 – 12 s.
    let settled = 0;
    await waitFor(
      async () =>
        (settled = (await rows(ids)).filter((r) => r.status === 'failed' || r.status === 'dead').length) ===
        ids.length,
      {
        timeoutMs: 40_000,
        progress: () => settled,
        message: () => `failures recorded (${settled} of ${ids.length})`,
      },
    );
    await db.query(
      `UPDATE outbox SET status = 'failed', attempts = 1, next_attempt_at = now() + interval '1 hour' WHERE id = ANY($1::bigint[])`,
      [ids],
    );
  }

  beforeAll(async () => {
    // Seven failed events of distinct aggregates (nothing parks), retried far in the future;
    // outbox.event.Page does not exist, so the broker refuses them.
    failed = await insertEvents(
      db.pool,
      Array.from({ length: 7 }, (_, i) => ev('Page', `p${i}`, i)),
    );
    await settleFailed(failed);
    // Three of them look three hours old, for the time window.
    await db.query(`UPDATE outbox SET created_at = now() - interval '3 hours' WHERE id = ANY($1::bigint[])`, [
      failed.slice(0, 3),
    ]);
  });

  it('pages by id without gaps or repeats, also while new events arrive', async () => {
    type Page = {
      events: { id: string; status: string; aggregateType: string }[];
      nextAfterId: string | null;
    };
    const base = ['events', 'list', '--status', 'failed', '--aggregate-type', 'Page', '--limit', '3'];
    const p1 = await opsJson<Page>(base);
    expect(p1.code).toBe(EXIT.OK);
    expect(p1.json.events.map((e) => e.id)).toEqual(failed.slice(0, 3));
    expect(p1.json.nextAfterId).toBe(failed[2]);
    // A new event in between lands after the pages already read.
    const [late] = await insertEvents(db.pool, [ev('Page', 'late', 99)]);
    await settleFailed([late!]);
    const p2 = await opsJson<Page>([...base, '--after-id', p1.json.nextAfterId!]);
    const p3 = await opsJson<Page>([...base, '--after-id', p2.json.nextAfterId!]);
    expect(p2.json.events.map((e) => e.id)).toEqual(failed.slice(3, 6));
    expect(p3.json.events.map((e) => e.id)).toEqual([failed[6], late]);
    expect(p3.json.nextAfterId).toBeNull();
    expect(p3.json.events.every((e) => e.status === 'failed' && e.aggregateType === 'Page')).toBe(true);

    const human = await ops([
      'events',
      'list',
      '--status',
      'failed',
      '--aggregate-type',
      'Page',
      '--limit',
      '2',
    ]);
    expect(human.out.split('\n')[0]).toMatch(
      /^id\s+status\s+aggregate_type\s+aggregate_id\s+event_type\s+attempts/,
    );
    expect(human.out).toMatch(
      new RegExp(`\\n${failed[0]}\\s+failed\\s+Page\\s+p0\\s+E\\s+1\\s+.*UNKNOWN_TOPIC_OR_PARTITION`),
    );
    expect(human.out).toMatch(new RegExp(`next page: --after-id ${failed[1]}`));
  });

  it('counts with time windows (relative and ISO) and the same filters', async () => {
    const count = async (extra: string[]) =>
      (await opsJson<{ count: number }>(['events', 'count', '--aggregate-type', 'Page', ...extra])).json
        .count;
    expect(await count(['--status', 'failed'])).toBe(8);
    expect(await count(['--status', 'failed', '--since', '4h', '--until', '2h'])).toBe(3);
    expect(await count(['--status', 'failed', '--since', '1h'])).toBe(5);
    expect(await count(['--status', 'dead,parked'])).toBe(0);
    const iso = new Date(Date.now() - 2 * 3600_000).toISOString();
    expect(await count(['--until', iso])).toBe(3);
    expect(await count(['--status', 'failed', '--after-id', failed[5]!])).toBe(2);
    expect(await count(['--status', 'failed', '--event-type', 'E'])).toBe(8);
    expect(await count(['--status', 'failed', '--event-type', 'Other'])).toBe(0);
    expect(await count(['--status', 'failed', '--error-contains', 'unknown_topic_or_partition'])).toBe(8);
    expect(await count(['--status', 'failed', '--error-contains', 'MESSAGE_TOO_LARGE'])).toBe(0);
    const human = await ops(['events', 'count', '--aggregate-type', 'Page']);
    expect(human.out).toMatch(/failed\s+8\n.*dead\s+0\n.*parked\s+0\n.*total\s+8/s);
  });

  it('rejects bad input with exit 64 and a clear message', async () => {
    const status = await ops(['events', 'list', '--status', 'broken']);
    expect(status.code).toBe(EXIT.USAGE);
    expect(status.err).toMatch(
      /unknown status "broken" \(known: pending, published, failed, dead, parked, discarded\)/,
    );
    const time = await ops(['events', 'count', '--since', 'yesterday']);
    expect(time.code).toBe(EXIT.USAGE);
    expect(time.err).toMatch(/"yesterday" is not a time/);
    const sub = await ops(['events', 'purge']);
    expect(sub.code).toBe(EXIT.USAGE);
    expect(sub.err).toMatch(/unknown events subcommand "purge"/);
    const flag = await ops(['events', 'list', '--limit', 'many']);
    expect(flag.code).toBe(EXIT.USAGE);
    expect(flag.err).toMatch(/--limit .*expected a whole number/);
  });

  it('show prints every column, the payload as JSON, text or hex, and the last error', async () => {
    const s = await ops(['events', 'show', failed[0]!]);
    expect(s.code).toBe(EXIT.OK);
    for (const col of [
      'event_id',
      'aggregate_type',
      'content_type',
      'headers',
      'created_at',
      'next_attempt_at',
    ]) {
      expect(s.out).toMatch(new RegExp(`^${col}\\s`, 'm'));
    }
    expect(s.out).toMatch(/^status\s+failed$/m);
    expect(s.out).toMatch(/^last_error\s+permanent\/UNKNOWN_TOPIC_OR_PARTITION/m);
    expect(s.out).toMatch(/payload \(json, \d+ bytes\):\n\{\n {2}"seq": 0\n\}/);

    const [bin] = await insertEvents(db.pool, [
      {
        aggregateType: 'Page',
        aggregateId: 'bin',
        eventType: 'E',
        payload: Buffer.from([0x08, 0x96, 0x01]),
        contentType: 'application/protobuf',
      },
    ]);
    const j = await opsJson<{
      payload: { encoding: string; value: unknown };
      id: string;
      last_error: string;
    }>(['events', 'show', bin!]);
    expect(j.json.id).toBe(bin);
    expect(j.json.payload).toEqual({ encoding: 'hex', value: '089601' });
    const f = await opsJson<{ payload: { encoding: string; value: unknown } }>([
      'events',
      'show',
      failed[1]!,
    ]);
    expect(f.json.payload).toEqual({ encoding: 'json', value: { seq: 1 } });

    const none = await ops(['events', 'show', '424242']);
    expect(none.code).toBe(EXIT.USAGE);
    expect(none.err).toMatch(/event 424242 does not exist/);
  });
});

describe('replay', () => {
  it('re-publishes exactly the window, in order, with the replay headers', async () => {
    await kafka.createTopic('outbox.event.Rep', 1);
    const before = await insertEvents(db.pool, [ev('Rep', 'r1', 0)]);
    const since = await dbNow();
    const inWindow = [
      ...(await insertEvents(db.pool, [ev('Rep', 'r1', 1), ev('Rep', 'r2', 2)])),
      ...(await insertEvents(db.pool, [ev('Rep', 'r1', 3)])),
    ];
    const until = await dbNow();
    const after = await insertEvents(db.pool, [ev('Rep', 'r2', 4)]);
    const all = [...before, ...inWindow, ...after];
    await waitFor(async () => (await statuses(all)) === Array(5).fill('published').join(), {
      message: 'originals published',
    });
    await waitFor(async () => (await seqs('outbox.event.Rep')).length === 5);
    const originals = await kafka.readAll('outbox.event.Rep');
    const rowCount = async () =>
      Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM outbox'))[0]!.n);
    const n0 = await rowCount();

    const dry = await ops([
      'replay',
      '--since',
      since,
      '--until',
      until,
      '--aggregate-type',
      'Rep',
      '--dry-run',
    ]);
    expect(dry.code).toBe(EXIT.OK);
    expect(dry.out).toMatch(
      new RegExp(`^3 event\\(s\\) would be replayed \\(original ids ${inWindow[0]}…${inWindow[2]}\\)`),
    );
    expect(await rowCount()).toBe(n0);

    const bad = await ops(['replay', '--until', until]);
    expect(bad.code).toBe(EXIT.USAGE);
    expect(bad.err).toMatch(/replay needs --since/);
    const badId = await ops(['replay', '--since', since, '--event-id', 'nope']);
    expect(badId.code).toBe(EXIT.USAGE);
    expect(await rowCount()).toBe(n0);

    const r = await ops([
      'replay',
      '--since',
      since,
      '--until',
      until,
      '--aggregate-type',
      'Rep',
      '--replay-batch-size',
      '2',
    ]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/^3 event\(s\) replayed/);
    expect(r.err).toMatch(/"audit":true.*"action":"replay".*"rows":3/);
    expect(await rowCount()).toBe(n0 + 3);

    await waitFor(async () => (await kafka.readAll('outbox.event.Rep')).length === 8, {
      timeoutMs: 20_000,
      message: 'three copies published',
    });
    const copies = (await kafka.readAll('outbox.event.Rep')).slice(5);
    const h = (m: (typeof copies)[number], k: string) => m.headers[k]?.toString();
    expect(copies.map((m) => h(m, 'x-replay-of'))).toEqual(inWindow);
    expect(copies.map((m) => JSON.parse(m.value!.toString()).seq)).toEqual([1, 2, 3]);
    // Same event_id (the `id` header) as the originals: consumers deduplicate.
    const originalIds = new Map(originals.map((m) => [JSON.parse(m.value!.toString()).seq, h(m, 'id')]));
    expect(copies.map((m) => h(m, 'id'))).toEqual([1, 2, 3].map((s) => originalIds.get(s)));
    const replayedAt = copies.map((m) => h(m, 'x-replayed-at'));
    expect(new Set(replayedAt).size).toBe(1);
    expect(Date.now() - Date.parse(replayedAt[0]!)).toBeLessThan(60_000);
    // The copies are rows of their own, with new ids above the originals.
    const copyRows = await db.query<{ id: string; of: string; event_id: string }>(
      "SELECT o.id::text AS id, headers->>'x-replay-of' AS of, event_id::text FROM outbox o WHERE headers ? 'x-replay-of' ORDER BY o.id",
    );
    expect(copyRows.map((c) => c.of)).toEqual(inWindow);
    expect(copyRows.every((c) => BigInt(c.id) > BigInt(after[0]!))).toBe(true);
  });
});

describe('slot drop', () => {
  it('refuses while the relay streams, asks for --yes, then drops; status then says the slot is missing', async () => {
    const active = await ops(['slot', 'drop', '--yes']);
    expect(active.code).toBe(EXIT.UNAVAILABLE);
    expect(active.err).toMatch(/is active \(pid \d+\).*nothing changed/);
    await relay!.stop();
    relay = null;
    const inactive = await opsJson<StatusJson>(['status']);
    expect(inactive.code).toBe(69);
    expect(inactive.json.problems.join()).toMatch(/is not active/);
    const unconfirmed = await ops(['slot', 'drop']);
    expect(unconfirmed.code).toBe(EXIT.USAGE);
    const exists = async () =>
      (await db.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slotOf(db)])).length === 1;
    expect(await exists()).toBe(true);
    const dropped = await ops(['slot', 'drop', '--yes']);
    expect(dropped.code).toBe(EXIT.OK);
    expect(dropped.out).toMatch(/slot \S+ dropped/);
    expect(dropped.err).toMatch(/"audit":true.*"action":"slot drop"/);
    expect(await exists()).toBe(false);
    const missing = await opsJson<StatusJson>(['status']);
    expect(missing.code).toBe(69);
    expect(missing.json.slot.exists).toBe(false);
    expect((await ops(['slot', 'drop', '--yes'])).code).toBe(EXIT.USAGE);
  });
});
