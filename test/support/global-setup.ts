/**
 * vitest globalSetup: provides ONE PostgreSQL with wal_level=logical for the whole run, as
 * `inject('pgAdminUrl')`, and ONE real Kafka broker, as `inject('kafkaBrokers')`. Test files create
 * their own databases on the PostgreSQL (test/support/postgres.ts) and their own topic namespace
 * on the broker (test/support/kafka.ts).
 *
 * Kafka, chosen in this order:
 *   1. KAFKA_TEST_BROKERS=host:port[,…] (an existing cluster, auto-creation of topics off);
 *   2. a local broker from Apache Kafka's jars (Java >= 17 and Maven; src/dev/local-kafka.ts);
 *   3. a Kafka container via testcontainers, if a container engine is reachable;
 *   4. otherwise fail, naming all three.
 *
 * Chosen in this order:
 *   1. OUTBOX_TEST_DATABASE_URL (must already have wal_level=logical);
 *   2. a throwaway cluster from the local server binaries (src/dev/throwaway-postgres.ts);
 *      OUTBOX_TEST_PG_VERSION=<major> (14 – 18; OUTBOX_PG_VERSION is read too) chooses its major:
 *      the local install of that major, else the npm registry's build of it, fetched into
 *      .cache/postgres on first use (src/dev/postgres-builds.ts; `npm run postgres -- fetch`);
 *   3. a postgres container via testcontainers (postgres:<that major>, else postgres:17), if a
 *      container engine is reachable;
 *   4. otherwise fail, naming all three.
 * Either way the run prints the server's version (`[test postgres] … PostgreSQL 18.4 …`).
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { kafkaVersionFromEnv, LocalKafkaCluster } from '../../src/dev/local-kafka.ts';
import { parseMajor } from '../../src/dev/postgres-builds.ts';
import { startThrowawayPostgres } from '../../src/dev/throwaway-postgres.ts';
import { hideKafkajsTimeoutWarnings } from '../../src/sinks/kafka/kafkajs/warnings.ts';
import { ROOT } from './relay.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser-ish URL (CREATEDB + REPLICATION) of the run's Postgres, on its `postgres` database. */
    pgAdminUrl: string;
    /** Which source provided it, e.g. "local binaries /usr/lib/postgresql/15/bin". */
    pgSource: string;
    /** The server's server_version_num, e.g. 150014 (tests that differ per version read it). */
    pgVersionNum: number;
  }
}

type Acquired = { url: string; source: string; teardown: () => Promise<void> };

function redact(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
}

/** The major version the run asks for: OUTBOX_TEST_PG_VERSION, else OUTBOX_PG_VERSION; undefined = any. */
export function testPgVersion(): string | undefined {
  return process.env.OUTBOX_TEST_PG_VERSION?.trim() || process.env.OUTBOX_PG_VERSION?.trim() || undefined;
}

/**
 * Checks that the server can do what the tests need (and is the major asked for); throws a message
 * that says how to fix it. Returns its version (server_version, server_version_num).
 */
export async function verifyLogicalPostgres(url: string): Promise<{ version: string; versionNum: number }> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const walLevel = (await client.query<{ wal_level: string }>('SHOW wal_level')).rows[0]?.wal_level;
    if (walLevel !== 'logical') {
      throw new Error(
        `The test Postgres at ${redact(url)} has wal_level=${walLevel}; the relay's tests need logical ` +
          'replication. Fix: `ALTER SYSTEM SET wal_level = logical;` then restart the server ' +
          '(and make sure max_replication_slots and max_wal_senders are > 0).',
      );
    }
    const role = (
      await client.query<{ rolsuper: boolean; rolcreatedb: boolean; rolreplication: boolean }>(
        'SELECT rolsuper, rolcreatedb, rolreplication FROM pg_roles WHERE rolname = current_user',
      )
    ).rows[0];
    if (!role || !(role.rolsuper || (role.rolcreatedb && role.rolreplication))) {
      throw new Error(
        `The user of ${redact(url)} needs CREATEDB and REPLICATION (or superuser): ` +
          '`ALTER ROLE <user> CREATEDB REPLICATION;`',
      );
    }
    const v = (
      await client.query<{ version: string; num: number }>(
        "SELECT current_setting('server_version') AS version, current_setting('server_version_num')::int AS num",
      )
    ).rows[0]!;
    const wanted = testPgVersion();
    if (wanted && Math.floor(v.num / 10_000) !== parseMajor(wanted)) {
      throw new Error(
        `OUTBOX_TEST_PG_VERSION asks for PostgreSQL ${wanted}, but ${redact(url)} runs ${v.version}: ` +
          'unset OUTBOX_TEST_DATABASE_URL to let the tests start that version, or point it at a server of that version',
      );
    }
    return { version: v.version, versionNum: v.num };
  } finally {
    await client.end();
  }
}

async function fromContainer(): Promise<Acquired> {
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  await getContainerRuntimeClient(); // throws if no container engine is reachable
  const wanted = testPgVersion();
  const image = `postgres:${wanted ? parseMajor(wanted) : 17}`;
  const container = await new GenericContainer(image)
    .withEnvironment({ POSTGRES_PASSWORD: 'postgres' })
    .withCommand([
      'postgres',
      ...['-c', 'wal_level=logical', '-c', 'max_replication_slots=64', '-c', 'max_wal_senders=64'],
      ...['-c', 'max_connections=200', '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
      ...['-c', 'full_page_writes=off'],
    ])
    .withExposedPorts(5432)
    .withTmpFs({ '/var/lib/postgresql/data': 'rw' })
    // The entrypoint starts a temporary server first, so "ready" is logged twice.
    .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
    .withStartupTimeout(120_000)
    .start();
  const url = `postgres://postgres:postgres@${container.getHost()}:${container.getMappedPort(5432)}/postgres`;
  return {
    url,
    source: `testcontainers ${image} (${container.getId().slice(0, 12)})`,
    teardown: async () => {
      await container.stop();
    },
  };
}

async function acquire(): Promise<Acquired> {
  const fromEnv = process.env.OUTBOX_TEST_DATABASE_URL;
  if (fromEnv) {
    return {
      url: fromEnv,
      source: `OUTBOX_TEST_DATABASE_URL (${redact(fromEnv)})`,
      teardown: async () => {},
    };
  }

  const reasons: string[] = [];
  try {
    const local = await startThrowawayPostgres({ version: testPgVersion() });
    return {
      url: local.url,
      source: `throwaway cluster from local binaries ${local.binDir} on port ${local.port}`,
      teardown: local.stop,
    };
  } catch (err) {
    reasons.push(`local binaries: ${(err as Error).message}`);
  }

  try {
    return await fromContainer();
  } catch (err) {
    reasons.push(`testcontainers: ${(err as Error).message}`);
  }

  throw new Error(
    'No PostgreSQL with wal_level=logical for the tests. Provide one of:\n' +
      '  1. OUTBOX_TEST_DATABASE_URL=postgres://user:pass@host:port/db of a server with wal_level=logical ' +
      '(user with CREATEDB + REPLICATION);\n' +
      '  2. local PostgreSQL server binaries (`apt-get install postgresql`, or set OUTBOX_PG_BINDIR) ' +
      'for a throwaway cluster (OUTBOX_TEST_PG_VERSION=14…18: that major, from the npm registry if not installed);\n' +
      '  3. a running container engine (Docker/Podman) for testcontainers postgres.\n' +
      `Why each automatic option failed:\n  - ${reasons.join('\n  - ')}`,
  );
}

type AcquiredKafka = { brokers: string[]; source: string; teardown: () => Promise<void> };

async function kafkaFromContainer(): Promise<AcquiredKafka> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  const { KafkaContainer } = await import('@testcontainers/kafka');
  await getContainerRuntimeClient(); // throws if no container engine is reachable
  const image = process.env.KAFKA_TEST_IMAGE ?? `apache/kafka:${kafkaVersionFromEnv()}`;
  const container = await new KafkaContainer(image)
    .withKraft()
    .withEnvironment({ KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'false', KAFKA_NUM_PARTITIONS: '1' })
    .start();
  return {
    brokers: [`${container.getHost()}:${container.getMappedPort(9093)}`],
    source: `testcontainers ${image}`,
    teardown: async () => {
      await container.stop();
    },
  };
}

async function acquireKafka(runDir: string): Promise<AcquiredKafka> {
  const fromEnv = process.env.KAFKA_TEST_BROKERS?.trim();
  if (fromEnv) {
    return {
      brokers: fromEnv.split(','),
      source: `KAFKA_TEST_BROKERS (${fromEnv})`,
      teardown: async () => {},
    };
  }
  const reasons: string[] = [];
  try {
    const dir = join(runDir, 'shared');
    const cluster = await LocalKafkaCluster.up({
      dir,
      port: 0,
      heapMb: 768,
      log: (line) => console.log(`[test kafka] ${line}`),
    });
    return {
      brokers: cluster.bootstrap,
      source: `local Apache Kafka ${cluster.version} from Maven Central jars (${dir})`,
      teardown: () => cluster.destroy(),
    };
  } catch (err) {
    reasons.push(`local broker from the jars: ${(err as Error).message}`);
  }
  try {
    return await kafkaFromContainer();
  } catch (err) {
    reasons.push(`testcontainers: ${(err as Error).message}`);
  }
  throw new Error(
    'No Kafka broker for the tests. Provide one of:\n' +
      '  1. KAFKA_TEST_BROKERS=host:port[,host:port] of an existing cluster (topic auto-creation off);\n' +
      '  2. Java >= 17 and Maven (`apt-get install openjdk-17-jre-headless maven`): the tests then run ' +
      'Apache Kafka from its jars on Maven Central (the first run downloads them);\n' +
      '  3. a running container engine (Docker/Podman) for testcontainers.\n' +
      `Why each automatic option failed:\n  - ${reasons.join('\n  - ')}`,
  );
}

/** Stops any dedicated cluster a test left running (a crashed worker cannot clean up after itself). */
async function stopLeftoverClusters(runDir: string): Promise<void> {
  let entries: string[] = [];
  try {
    entries = readdirSync(runDir);
  } catch {
    return;
  }
  await Promise.all(entries.map((e) => LocalKafkaCluster.down(join(runDir, e))));
  rmSync(runDir, { recursive: true, force: true });
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  hideKafkajsTimeoutWarnings();
  const started = Date.now();
  const runDir = join(ROOT, '.tmp', 'test-kafka', `run-${process.pid}`);
  mkdirSync(runDir, { recursive: true });
  const [pgResult, kafkaResult] = await Promise.allSettled([
    (async () => {
      const pgs = await acquire();
      try {
        const v = await verifyLogicalPostgres(pgs.url);
        console.log(
          `[test postgres] PostgreSQL ${v.version}: ${pgs.source}, ready in ${Date.now() - started} ms`,
        );
        return { ...pgs, versionNum: v.versionNum };
      } catch (err) {
        await pgs.teardown();
        throw err;
      }
    })(),
    (async () => {
      const k = await acquireKafka(runDir);
      console.log(`[test kafka] ${k.source}: ${k.brokers.join(',')}, ready in ${Date.now() - started} ms`);
      return k;
    })(),
  ]);
  if (pgResult.status === 'rejected' || kafkaResult.status === 'rejected') {
    if (pgResult.status === 'fulfilled') await pgResult.value.teardown();
    if (kafkaResult.status === 'fulfilled') await kafkaResult.value.teardown();
    await stopLeftoverClusters(runDir);
    throw pgResult.status === 'rejected' ? pgResult.reason : (kafkaResult as PromiseRejectedResult).reason;
  }
  const pgs = pgResult.value;
  const kafka = kafkaResult.value;
  project.provide('pgAdminUrl', pgs.url);
  project.provide('pgSource', pgs.source);
  project.provide('pgVersionNum', pgs.versionNum);
  project.provide('kafkaBrokers', kafka.brokers);
  project.provide('kafkaSource', kafka.source);
  project.provide('kafkaRunDir', runDir);
  return async () => {
    await Promise.allSettled([pgs.teardown(), kafka.teardown(), stopLeftoverClusters(runDir)]);
  };
}
