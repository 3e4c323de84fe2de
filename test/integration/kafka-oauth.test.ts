import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/load.ts';
import { EXIT } from '../../src/exit-codes.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import { Relay } from '../../src/supervisor/relay.ts';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { OidcProvider } from '../support/oidc-provider.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  slotOf,
  slotPosition,
  spawnCli,
  testConfig,
} from '../support/relay.ts';

/**
 * SASL/OAUTHBEARER against a real broker that validates tokens itself: Apache Kafka's
 * OAuthBearerValidatorCallbackHandler on the CLIENT listener checks each token's RS256 signature
 * against the JWKS of a small OpenID provider run by the test (test/support/oidc-provider.ts), its
 * exp, sub, audience and issuer; connections.max.reauth.ms makes the broker end each session when
 * its token expires (KIP-368), so the relay must re-authenticate with a fresh token mid-stream.
 *
 * The relay gets its tokens from the provider's token endpoint (client credentials, the secret
 * from a file). What is proven:
 *   - login and publish, with a token from the endpoint or from --kafka-oauth-token-command;
 *   - 20-second tokens over a stream of ~40 s: refreshed in band, nothing fails, order kept;
 *   - the token endpoint down once the token expired: a clear transient error, nothing failed,
 *     the slot not confirmed past the events, published once the endpoint is back;
 *   - tokens the broker refuses (signed with a key outside the JWKS, then already expired): the
 *     broker's refusal as a clear transient error, each refused token dropped (a new one fetched
 *     at every retry), published once the provider issues valid tokens;
 *   - neither the client secret nor any token reaches a log line.
 */
const db = useTestDatabase();
let kafka: DedicatedKafka;
let provider: OidcProvider;
let relay: Relay | null = null;
let logs: string[] = [];
const SECRET = 'oauth-client-secret-7f3a';

beforeAll(async () => {
  provider = await OidcProvider.start({ relay: SECRET });
  kafka = await startDedicatedKafka({
    oauthbearer: {
      jwksUrl: provider.jwksUrl,
      expectedAudience: provider.audience,
      expectedIssuer: provider.issuer,
      maxReauthMs: 60_000,
    },
  });
  await migrateDb(db);
  for (const t of ['Login', 'Command', 'Cli', 'Refresh', 'Down', 'Refused'])
    await kafka.createTopic(`outbox.event.${t}`, 1);
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
  provider.mode = 'ok';
  provider.lifetimeS = 300;
});

afterAll(async () => {
  await kafka?.stop();
  await provider?.stop();
});

function oauthConfig(): Config {
  const dir = mkdtempSync(join(tmpdir(), 'oauth-'));
  writeFileSync(join(dir, 'secret'), `${SECRET}\n`);
  return testConfig(
    db,
    [
      '--kafka-sasl-mechanism',
      'oauthbearer',
      '--kafka-oauth-token-url',
      provider.tokenUrl,
      '--kafka-oauth-client-id',
      'relay',
      '--kafka-oauth-client-secret-file',
      join(dir, 'secret'),
      '--kafka-oauth-scope',
      'kafka.produce',
      // Confluent Cloud's extensions; Kafka's validator accepts any.
      '--kafka-oauth-extension',
      'logicalCluster=lkc-test',
      '--kafka-oauth-extension',
      'identityPoolId=pool-test',
      '--retry-max-ms',
      '1000',
    ],
    kafka,
  );
}

/** An in-process relay whose log lines (info and up) are kept in `logs`. */
async function startRelay(): Promise<{ relay: Relay; sink: KafkaSink }> {
  logs = [];
  const config = oauthConfig();
  const log = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, done) {
        logs.push(String(chunk));
        done();
      },
    }),
  );
  const sink = new KafkaSink(config, log);
  relay = new Relay({ config, sink, log });
  await relay.start();
  return { relay, sink };
}

const ev = (type: string, key: string, seq: number) => ({
  aggregateType: type,
  aggregateId: key,
  eventType: 'E',
  payload: JSON.stringify({ seq }),
});

const statuses = async (ids: string[]) =>
  (
    await db.query<{ status: string }>('SELECT status FROM outbox_with_status WHERE id = ANY($1::bigint[])', [
      ids,
    ])
  ).map((r) => r.status);

const allPublished = async (ids: string[]) => (await statuses(ids)).every((s) => s === 'published');

const outage = async () => (await relay!.metrics.brokerOutage.get()).values[0]?.value === 1;

function noSecretsLogged(): void {
  const text = logs.join('');
  expect(text).not.toContain(SECRET);
  for (const t of provider.issued) expect(text).not.toContain(t.token.split('.')[2]);
}

async function seqs(topic: string): Promise<number[]> {
  return (await kafka.readAll(topic)).map((m) => JSON.parse(m.value!.toString()).seq as number);
}

async function expectNothingAdvanced(ids: string[], commitLsn: string): Promise<void> {
  expect(await statuses(ids), 'no event may be failed for a credentials problem').toEqual(
    ids.map(() => 'pending'),
  );
  const { confirmed } = await slotPosition(db);
  const notPast = await db.query<{ ok: boolean }>('SELECT $1::pg_lsn <= $2::pg_lsn AS ok', [
    confirmed,
    commitLsn,
  ]);
  expect(notPast[0]!.ok, `slot confirmed ${confirmed} past the unpublished commit ${commitLsn}`).toBe(true);
}

describe('SASL/OAUTHBEARER (Kafka validates the tokens against a JWKS)', () => {
  it('logs in with a client-credentials token and publishes', async () => {
    const before = provider.issued.length;
    await startRelay();
    const ids = await insertEvents(
      db.pool,
      [0, 1, 2, 3, 4].map((i) => ev('Login', 'k', i)),
    );
    await waitFor(() => allPublished(ids), { timeoutMs: 60_000, message: 'published' });
    expect(await seqs('outbox.event.Login')).toEqual([0, 1, 2, 3, 4]);
    expect(provider.issued.length).toBeGreaterThan(before);
    expect(provider.refused).toBe(0);
    noSecretsLogged();
  });

  it('20-second tokens over a ~40 s stream: re-authenticated in band with fresh tokens, nothing fails, order kept', async () => {
    provider.lifetimeS = 20;
    const { relay: r } = await startRelay();
    const started = provider.issued.length;
    const ids: string[] = [];
    const until = Date.now() + 40_000;
    for (let seq = 0; Date.now() < until; seq++) {
      ids.push(...(await insertEvents(db.pool, [ev('Refresh', 'k', seq)])));
      // One event per ~0.4 s, each awaited (not a fixed sleep of the test's outcome).
      await new Promise((res) => setTimeout(res, 400));
    }
    await waitFor(() => allPublished(ids), {
      timeoutMs: 60_000,
      message: 'every event of the stream published',
    });
    const got = await seqs('outbox.event.Refresh');
    expect(got).toEqual(ids.map((_, i) => i));
    // The sessions end with their 20 s tokens: at least one new token per ~10 s (kafkajs
    // re-authenticates 10 s before the session lifetime the broker announced).
    expect(provider.issued.length - started).toBeGreaterThanOrEqual(3);
    const transient = (await r.metrics.transientErrors.get()).values.reduce((n, v) => n + v.value, 0);
    expect(transient, 're-authentication must not cost a failed send').toBe(0);
    noSecretsLogged();
  });

  it('--kafka-oauth-token-command: logs in with the token a command prints (JSON with expires_in)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'oauth-cmd-'));
    const now = Math.floor(Date.now() / 1000);
    const token = provider.sign({
      sub: 'relay-cmd',
      aud: provider.audience,
      iss: provider.issuer,
      iat: now,
      exp: now + 300,
    });
    writeFileSync(join(dir, 'token.json'), JSON.stringify({ token, expires_in: 300 }));
    const config = testConfig(
      db,
      [
        '--kafka-sasl-mechanism',
        'oauthbearer',
        '--kafka-oauth-token-command',
        `cat ${join(dir, 'token.json')}`,
      ],
      kafka,
    );
    const sink = new KafkaSink(config, pino({ level: 'silent' }));
    relay = new Relay({ config, sink, log: pino({ level: 'silent' }) });
    await relay.start();
    const ids = await insertEvents(db.pool, [ev('Command', 'k', 0)]);
    await waitFor(() => allPublished(ids), { timeoutMs: 60_000, message: 'published' });
    expect(await seqs('outbox.event.Command')).toEqual([0]);
    expect(sink.tokens?.fetches, 'the token is reused while it is valid').toBe(1);
  });

  it('`outbox-relay run` (the CLI, under plain Node): the client secret from KAFKA_OAUTH_CLIENT_SECRET_FILE, published, no secret in its logs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'oauth-cli-'));
    writeFileSync(join(dir, 'secret'), `${SECRET}\n`);
    const cli = spawnCli(
      [
        'run',
        '--database-url',
        db.url,
        '--slot',
        slotOf(db),
        ...kafka.relayArgs(),
        '--kafka-sasl-mechanism',
        'oauthbearer',
        '--kafka-oauth-token-url',
        provider.tokenUrl,
        '--kafka-oauth-client-id',
        'relay',
      ],
      { KAFKA_OAUTH_CLIENT_SECRET_FILE: join(dir, 'secret'), LOG_LEVEL: 'debug' },
    );
    try {
      const ids = await insertEvents(db.pool, [ev('Cli', 'k', 0)]);
      await waitFor(() => allPublished(ids), {
        timeoutMs: 90_000,
        message: () => `published by the CLI; its logs:\n${cli.logs().slice(-3000)}`,
      });
      expect(await seqs('outbox.event.Cli')).toEqual([0]);
    } finally {
      cli.kill();
      await cli.exited;
    }
    expect(cli.logs()).not.toContain(SECRET);
    for (const t of provider.issued) expect(cli.logs()).not.toContain(t.token.split('.')[2]);
  });

  it('`outbox-relay check` logs in with OAUTHBEARER to check the topics; a wrong client secret fails it with the fix and no secret in its output', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'oauth-check-'));
    writeFileSync(join(dir, 'good'), `${SECRET}\n`);
    writeFileSync(join(dir, 'bad'), 'not-the-secret\n');
    const check = (secretFile: string) =>
      spawnCli(
        [
          'check',
          '--database-url',
          db.url,
          '--slot',
          slotOf(db),
          ...kafka.relayArgs(),
          '--kafka-sasl-mechanism',
          'oauthbearer',
          '--kafka-oauth-token-url',
          provider.tokenUrl,
          '--kafka-oauth-client-id',
          'relay',
          '--kafka-oauth-client-secret-file',
          secretFile,
          '--kafka-topics',
          'verify',
          '--kafka-topic-override',
          'Cli=partitions=1',
        ],
        { LOG_LEVEL: 'debug' },
      );
    const issuedBefore = provider.issued.length;
    const good = check(join(dir, 'good'));
    expect(await good.exited, good.logs()).toBe(0);
    expect(good.logs()).toMatch(
      /"topic":"outbox\.event\.Cli".*topic checked|topic checked.*outbox\.event\.Cli/,
    );
    expect(provider.issued.length, 'check fetched a token from the endpoint').toBeGreaterThan(issuedBefore);
    const bad = check(join(dir, 'bad'));
    // An OAuth error is a broker-side outage for `run` (it retries); a one-shot `check` gives up: 69.
    expect(await bad.exited, bad.logs()).toBe(EXIT.UNAVAILABLE);
    expect(bad.logs()).toMatch(/answered 401 \(invalid_client/);
    expect(bad.logs()).toMatch(/--kafka-oauth-client-id/);
    for (const out of [good.logs() + good.stdout(), bad.logs() + bad.stdout()]) {
      expect(out).not.toContain(SECRET);
      for (const t of provider.issued) expect(out).not.toContain(t.token.split('.')[2]);
    }
  });

  it('the token endpoint down when a new token is needed: a clear transient error, nothing advanced, published once it is back', async () => {
    provider.lifetimeS = 20;
    await startRelay();
    const warm = await insertEvents(db.pool, [ev('Down', 'k', 0)]);
    await waitFor(() => allPublished(warm), { timeoutMs: 60_000, message: 'first event published' });
    provider.mode = 'down';
    const last = provider.issued.at(-1)!;
    // The broker ends the session at the token's expiry: from then on a new token is needed.
    await waitFor(() => Date.now() > last.exp + 500, { timeoutMs: 30_000, message: 'last token expired' });
    const { ids, commitLsn } = await insertEventsReportingCommit(db, [
      ev('Down', 'k', 1),
      ev('Down', 'k', 2),
    ]);
    await waitFor(outage, { timeoutMs: 60_000, message: 'the token endpoint outage is reported' });
    await waitFor(() => provider.refused >= 2, { timeoutMs: 30_000, message: 'the relay retries' });
    await expectNothingAdvanced(ids, commitLsn);
    expect(logs.join('')).toMatch(
      /token endpoint http:\/\/127\.0\.0\.1:\d+\/token answered 503 \(temporarily_unavailable\)/,
    );
    provider.mode = 'ok';
    await waitFor(() => allPublished(ids), {
      timeoutMs: 60_000,
      message: 'published once the endpoint is back',
    });
    expect(await seqs('outbox.event.Down')).toEqual([0, 1, 2]);
    noSecretsLogged();
  });

  it('tokens the broker refuses (unknown signing key, then expired): a clear transient error, a new token at each retry, nothing advanced', async () => {
    provider.mode = 'wrong-key';
    const before = provider.issued.length;
    await startRelay();
    const { ids, commitLsn } = await insertEventsReportingCommit(db, [
      ev('Refused', 'k', 0),
      ev('Refused', 'k', 1),
    ]);
    await waitFor(() => logs.some((l) => /refused the relay's credentials/.test(l)), {
      timeoutMs: 60_000,
      message: "the broker's refusal is logged with the fix",
    });
    const afterWrongKey = provider.issued.length;
    expect(afterWrongKey).toBeGreaterThan(before);
    provider.mode = 'expired';
    // A refused token is dropped: the retry fetches a new one (an expired one, now).
    await waitFor(() => provider.issued.length >= afterWrongKey + 2, {
      timeoutMs: 60_000,
      message: 'new tokens fetched after refusals',
    });
    await expectNothingAdvanced(ids, commitLsn);
    expect(await seqs('outbox.event.Refused')).toEqual([]);
    provider.mode = 'ok';
    await waitFor(() => allPublished(ids), { timeoutMs: 60_000, message: 'published with a valid token' });
    expect(await seqs('outbox.event.Refused')).toEqual([0, 1]);
    noSecretsLogged();
  });
});
