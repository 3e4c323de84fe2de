/**
 * The console over a database the relay's tables are not created in yet (an operator opened the
 * console before `migrate`, or the Debezium preset's side table was never created): every page
 * that reads a table answers 503 "Not migrated" naming the missing table and the command that
 * creates it — before, a bare 500 "internal error". Real PostgreSQL, nothing migrated; then
 * migrated, an operator's missing event is 404 (OpsNotFoundError, not the message's wording,
 * decides) and a bad filter is not.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../test/support/postgres.ts';
import { migrateDb } from '../../test/support/relay.ts';
import { loadConfig } from '../config/load.ts';
import { type HttpServer, startHttpServer } from '../http/server.ts';
import type { RelayView } from '../observability/health.ts';
import { silentLogger } from '../observability/logger.ts';
import { RelayMetrics } from '../observability/metrics.ts';

const db = useTestDatabase();
const servers: HttpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function relay(): RelayView {
  const metrics = new RelayMetrics();
  metrics.setState('streaming');
  return { state: 'streaming', waitingReason: null, confirmedLsn: null, lastProgressAt: Date.now(), metrics };
}

async function consoleOver(extra: string[]) {
  const config = loadConfig(
    'run',
    ['--database-url', db.url, ...(extra.length ? [] : ['--sink', 'stdout']), ...extra],
    {
      OUTBOX_CONSOLE_TOKEN: 'a-token-of-enough-length',
    },
  ).config;
  const s = await startHttpServer({
    port: 0,
    host: '127.0.0.1',
    relay: relay(),
    slot: config.slot,
    log: silentLogger(),
    console: { config },
  });
  servers.push(s);
  return async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${s.port}${path}`);
    return { status: r.status, text: await r.text() };
  };
}

describe('the console before migrate', () => {
  it.each([
    ['the outbox table', [], 'public.outbox', ''],
    [
      "the Debezium preset's side table",
      [
        ...['--compat', 'debezium', '--debezium', 'route.topic.replacement=t.$1'],
        ...['--sink', 'kafka', '--kafka-brokers', '127.0.0.1:1'],
      ],
      'public.outbox_relay_failed',
      ' --compat debezium',
    ],
  ])('%s: the pages say which table is missing and how to create it', async (_, args, table, flags) => {
    const get = await consoleOver(args);
    for (const path of ['/console/', '/console/events']) {
      const r = await get(path);
      expect(r.status, `${path}: ${r.text.slice(0, 300)}`).toBe(503);
      expect(r.text).toContain('Not migrated');
      expect(r.text).toContain(`relation &quot;${table}&quot; does not exist`);
      expect(r.text).toContain(`outbox-relay migrate${flags}`);
    }
  });
});

describe('once migrated', () => {
  it('an event that does not exist is 404 Not found; a bad filter is not', async () => {
    await migrateDb(db);
    const get = await consoleOver([]);
    const missing = await get('/console/events/987654');
    expect(missing.status, missing.text.slice(0, 300)).toBe(404);
    expect(missing.text).toContain('event 987654 does not exist');
    // A bad filter is shown on the events page itself, beside the form (200), never as a 404.
    const bad = await get('/console/events?status=nonsense');
    expect(bad.text).toContain('unknown status');
    expect(bad.status).not.toBe(404);
  });
});
