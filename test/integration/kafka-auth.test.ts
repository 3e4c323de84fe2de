import {
  AclOperationTypes,
  AclPermissionTypes,
  AclResourceTypes,
  type Admin,
  ResourcePatternTypes,
} from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  slotPosition,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

/**
 * Authorization refusals of a real broker: SASL/PLAIN on the client listener and the
 * StandardAuthorizer with ACLs.
 *   - TOPIC_AUTHORIZATION_FAILED (the principal may not write that topic): permanent for that
 *     event — recorded failed, other topics keep flowing, published once the ACL is granted.
 *   - CLUSTER_AUTHORIZATION_FAILED (the principal may write nothing, so the idempotent producer
 *     cannot get a producer id): not about any one event — nothing is failed, nothing advances,
 *     the relay reports it and resumes once the permission is granted.
 */
const db = useTestDatabase();
let kafka: DedicatedKafka;
let relay: Relay | null = null;

const USERS = { admin: 'admin-secret', relay: 'relay-secret', nobody: 'nobody-secret' };

function relayAs(user: 'relay' | 'nobody', extra: string[] = []) {
  return testConfig(
    db,
    [
      '--kafka-sasl-mechanism',
      'plain',
      '--kafka-sasl-username',
      user,
      '--kafka-sasl-password',
      USERS[user],
      '--max-attempts',
      '0',
      '--failure-backoff-ms',
      '200',
      '--failure-backoff-max-ms',
      '400',
      '--sweep-interval-ms',
      '100',
      ...extra,
    ],
    kafka,
  );
}

async function allowWrite(admin: Admin, user: string, topic: string): Promise<void> {
  await admin.createAcls({
    acl: [AclOperationTypes.WRITE, AclOperationTypes.DESCRIBE].map((operation) => ({
      resourceType: AclResourceTypes.TOPIC,
      resourceName: topic,
      resourcePatternType: ResourcePatternTypes.LITERAL,
      principal: `User:${user}`,
      host: '*',
      operation,
      permissionType: AclPermissionTypes.ALLOW,
    })),
  });
}

const ev = (type: string, key: string, seq: number) => ({
  aggregateType: type,
  aggregateId: key,
  eventType: 'E',
  payload: JSON.stringify({ seq }),
});
const statusOf = async (id: string) =>
  (
    await db.query<{ status: string; last_error: string | null }>(
      'SELECT status, last_error FROM outbox_with_status WHERE id = $1',
      [id],
    )
  )[0]!;

beforeAll(async () => {
  kafka = await startDedicatedKafka({ sasl: { users: USERS, superUsers: ['admin'] } });
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Open', 1);
  await kafka.createTopic('outbox.event.Secret', 1);
  await allowWrite(await kafka.admin(), 'relay', 'outbox.event.Open');
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
});

afterAll(async () => {
  await kafka?.stop();
});

describe('ACLs', () => {
  it('TOPIC_AUTHORIZATION_FAILED: the event is recorded failed, others flow, and it is published once the ACL is granted', async () => {
    const config = relayAs('relay');
    relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
    await waitFor(() => relay!.state === 'streaming', { message: 'relay streaming' });
    const [s1, o1] = await insertEvents(db.pool, [ev('Secret', 's', 0), ev('Open', 'o', 0)]);
    const [o2] = await insertEvents(db.pool, [ev('Open', 'o', 1)]);
    await waitFor(async () => (await statusOf(o2!)).status === 'published', {
      timeoutMs: 30_000,
      message: 'the permitted topic flows',
    });
    expect((await statusOf(o1!)).status).toBe('published');
    await waitFor(async () => (await statusOf(s1!)).status === 'failed', {
      timeoutMs: 30_000,
      message: 's1 failed',
    });
    expect((await statusOf(s1!)).last_error).toMatch(/permanent\/TOPIC_AUTHORIZATION_FAILED/);
    expect(await kafka.readAll('outbox.event.Secret')).toEqual([]);
    await allowWrite(await kafka.admin(), 'relay', 'outbox.event.Secret');
    await waitFor(async () => (await statusOf(s1!)).status === 'published', {
      timeoutMs: 30_000,
      message: 's1 published once the ACL exists',
    });
    const secret = await kafka.readAll('outbox.event.Secret');
    expect(secret.map((m) => JSON.parse(m.value!.toString()).seq)).toEqual([0]);
  });

  it('CLUSTER_AUTHORIZATION_FAILED (no write permission at all): nothing is failed or confirmed; resumes once granted', async () => {
    const config = relayAs('nobody');
    relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
    const {
      ids: [n1],
      commitLsn,
    } = await insertEventsReportingCommit(db, [ev('Open', 'n', 0)]);
    await waitFor(async () => (await relay!.metrics.brokerOutage.get()).values[0]?.value === 1, {
      timeoutMs: 30_000,
      message: 'the refusal is reported as an outage of the Kafka path',
    });
    await new Promise((r) => setTimeout(r, 2000));
    expect((await statusOf(n1!)).status, 'no event may be failed for a cluster-wide permission').toBe(
      'pending',
    );
    const { confirmed } = await slotPosition(db);
    const notPast = await db.query<{ ok: boolean }>('SELECT $1::pg_lsn <= $2::pg_lsn AS ok', [
      confirmed,
      commitLsn,
    ]);
    expect(notPast[0]!.ok, `slot confirmed ${confirmed} past the unpublished commit ${commitLsn}`).toBe(true);
    await allowWrite(await kafka.admin(), 'nobody', 'outbox.event.Open');
    await waitFor(async () => (await statusOf(n1!)).status === 'published', {
      timeoutMs: 60_000,
      message: 'published once the principal may write',
    });
  });
});
