/**
 * ReplicationConnection against the run's PostgreSQL: a graceful close must not leave anything
 * behind that keeps the process alive (a stop used to take ≥ 2 s: close() raced end() against a
 * 2 s timer and never cleared it, so the process waited for the timer after every stop).
 */
import { describe, expect, it } from 'vitest';
import { useTestDatabase, waitFor } from '../../test/support/postgres.ts';
import { migrateDb, slotOf } from '../../test/support/relay.ts';
import { pgoutputOptions, ReplicationConnection } from './connection.ts';

const db = useTestDatabase();

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('ReplicationConnection.close', () => {
  it('ends the stream at once and leaves no timer running', async () => {
    await migrateDb(db);
    const conn = await ReplicationConnection.open(db.url);
    let keepalives = 0;
    const streaming = conn.stream(
      { slot: slotOf(db), publication: 'outbox_pub' },
      { onData: () => {}, onKeepalive: () => keepalives++ },
    );
    streaming.catch(() => {});
    // Asked for before START_REPLICATION is on the wire (the stream first reads the server's
    // version and column types): sent right after it. The server answers with a keepalive.
    conn.sendStatus(0n, 0n, true);
    await waitFor(() => keepalives > 0, { message: 'a keepalive' });
    expect(conn.binary).toBe(true); // PostgreSQL 15, the migrated table's column types
    const before = timers();
    const t0 = performance.now();
    await conn.close();
    const ms = performance.now() - t0;
    expect(ms).toBeLessThan(1000);
    expect(timers()).toBeLessThanOrEqual(before);
  });
});

describe('pgoutputOptions', () => {
  it('names the publication; messages and binary values only when asked', () => {
    expect(pgoutputOptions({ publication: 'p', binary: false })).toEqual([
      ['proto_version', '1'],
      ['publication_names', 'p'],
    ]);
    expect(pgoutputOptions({ publication: 'p', messages: true, binary: true })).toEqual([
      ['proto_version', '1'],
      ['publication_names', 'p'],
      ['messages', 'true'],
      ['binary', 'true'],
    ]);
  });
});
