import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import type { Config } from '../config/load.ts';
import { OPTIONS } from '../config/options.ts';
import { type HttpServer, startHttpServer } from '../http/server.ts';
import { countsByStatus, notPublishedCount } from '../lifecycle/queries.ts';
import type { Logger } from '../observability/logger.ts';
import { sleep } from '../retry/backoff.ts';
import { StdoutSink } from '../sinks/stdout.ts';
import { migrate } from '../store/migrate.ts';
import { readSlotRow } from '../store/slots.ts';
import { qualified } from '../store/sql-ident.ts';
import { Relay } from '../supervisor/relay.ts';
import { startThrowawayPostgres } from './throwaway-postgres.ts';

const AGGREGATES = [
  {
    type: 'Order',
    ids: ['order-1001', 'order-1002', 'order-1003'],
    events: ['OrderPlaced', 'OrderPaid', 'OrderShipped'],
  },
  { type: 'Customer', ids: ['cust-7', 'cust-8'], events: ['CustomerRegistered', 'CustomerEmailChanged'] },
];
/** The aggregate types of the sample events (the playground creates their topics). */
export const SAMPLE_AGGREGATE_TYPES: readonly string[] = AGGREGATES.map((a) => a.type);

/** The i-th sample event: JSON mostly, a binary payload now and then (shown base64). */
function sampleEvent(i: number) {
  const agg = AGGREGATES[i % AGGREGATES.length]!;
  const id = agg.ids[Math.floor(i / AGGREGATES.length) % agg.ids.length]!;
  const type = agg.events[Math.floor(i / (AGGREGATES.length * agg.ids.length)) % agg.events.length]!;
  const binary = i % 5 === 4;
  return {
    aggregateType: agg.type,
    aggregateId: id,
    eventType: type,
    payload: binary
      ? Buffer.from([0x0a, 0x04, 0x64, 0x65, 0x6d, 0x6f, 0x10, i])
      : Buffer.from(JSON.stringify({ seq: i, id, type })),
    contentType: binary ? 'application/x-protobuf' : 'application/json',
    headers: { source: 'demo' },
  };
}

/** Sample events from..from+count-1, in one transaction. */
export async function insertSampleEvents(
  db: pg.Client,
  table: string,
  from: number,
  count: number,
): Promise<void> {
  await db.query('BEGIN');
  for (let i = from; i < from + count; i++) {
    const e = sampleEvent(i);
    await db.query(
      `INSERT INTO ${table} (aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [
        e.aggregateType,
        e.aggregateId,
        e.eventType,
        e.payload,
        e.contentType,
        e.headers,
        `00-${'ab'.repeat(16)}-${'cd'.repeat(8)}-01`,
      ],
    );
  }
  await db.query('COMMIT');
}

/**
 * `outbox-relay demo`: a throwaway PostgreSQL from the local binaries, the outbox migrated,
 * the relay streaming to stdout (NDJSON), and sample events inserted in a few transactions.
 * Exits once every event was relayed and confirmed (or runs on with --follow until Ctrl-C).
 * The operator console is on (loopback only, a fresh operator token in a 0600 file named in the log); on a
 * terminal the demo keeps it up after the sample events until Ctrl-C.
 */
export async function runDemo(c: Config, log: Logger, _argv: string[]): Promise<number> {
  log.info('demo: starting a throwaway PostgreSQL (wal_level=logical) from the local binaries');
  const pgServer = await startThrowawayPostgres({ logger: (m) => log.debug(m) });
  const db = new pg.Client({ connectionString: pgServer.url });
  let relay: Relay | null = null;
  let http: HttpServer | null = null;
  let tokenFile: string | null = null;
  try {
    await db.connect();
    await migrate(db, c, log);
    // A throwaway token for a throwaway database, so the console's actions can be tried.
    const consoleToken = randomBytes(18).toString('base64url');
    const config: Config = {
      ...c,
      databaseUrl: pgServer.url,
      sink: 'stdout',
      console: true,
      consoleToken,
    };
    // Secrets never go to logs: the token is in a file only this user can read, removed at exit.
    tokenFile = join(mkdtempSync(join(tmpdir(), 'outbox-demo-')), 'console-token');
    writeFileSync(tokenFile, `${consoleToken}\n`, { mode: 0o600 });
    relay = new Relay({ config, sink: new StdoutSink(), log });
    await relay.start();
    http = await startDemoHttp(relay, config, log);
    log.info(
      { url: `http://127.0.0.1:${http.port}/console/`, tokenFile },
      `demo: operator console at http://127.0.0.1:${http.port}/console/ (log in with the token in ${tokenFile})`,
    );
    const table = qualified(c.schema, c.table);
    const total = c.demoEvents ?? 12;
    let inserted = 0;
    for (const size of [1, 3]) {
      if (inserted >= total) break;
      const n = Math.min(size, total - inserted);
      await insertSampleEvents(db, table, inserted, n);
      inserted += n;
      await sleep(300);
    }
    if (inserted < total) await insertSampleEvents(db, table, inserted, total - inserted);
    inserted = total;
    log.info({ events: inserted }, 'demo: sample events committed; waiting until all are relayed');

    let stop = false;
    const onSignal = () => {
      stop = true;
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    const deadline = Date.now() + 60_000;
    let announced = false;
    for (;;) {
      const notPublished = await notPublishedCount(db, table);
      if (stop) break;
      if (notPublished === 0 && !c.demoFollow) {
        // On a terminal the console stays up for a look; scripts and CI get the exit.
        if (!process.stdout.isTTY) break;
        if (!announced) {
          announced = true;
          log.info(
            `demo: every event relayed; the console stays up at http://127.0.0.1:${http.port}/console/ until Ctrl-C`,
          );
        }
        await sleep(500);
        continue;
      }
      if (!c.demoFollow && Date.now() > deadline)
        throw new Error('demo: events were not relayed within 60 s');
      if (c.demoFollow) {
        await insertSampleEvents(db, table, inserted, 1);
        inserted++;
        await sleep(1000);
      } else {
        await sleep(100);
      }
      if (relay.state === 'stopped') {
        await relay.done(); // the relay's own error, when it ended on one
        throw new Error('demo: the relay stopped unexpectedly');
      }
    }
    await relay.stop();
    await relay.done();
    const slot = await readSlotRow(db, c.slot);
    const counts = await countsByStatus(db, table);
    log.info(
      {
        events: inserted,
        rows: counts,
        confirmedFlushLsn: slot?.confirmed_flush_lsn,
      },
      'demo: done — every event relayed to stdout, recorded published, and the slot confirmed past it',
    );
    return 0;
  } finally {
    await http?.close();
    await relay?.stop();
    await db.end().catch(() => {});
    await pgServer.stop();
    if (tokenFile) rmSync(dirname(tokenFile), { recursive: true, force: true });
  }
}

/** The HTTP server with the console on loopback: the usual port, or any free one when it is taken. */
async function startDemoHttp(relay: Relay, config: Config, log: Logger): Promise<HttpServer> {
  const port = OPTIONS.find((o) => o.key === 'httpPort')!.default as number;
  const start = (p: number) =>
    startHttpServer({ port: p, host: '127.0.0.1', relay, slot: config.slot, log, console: { config } });
  return start(port).catch(() => start(0));
}
