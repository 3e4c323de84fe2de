/**
 * The session's handling of the replication stream, against a scripted connection: which
 * positions it confirms for logical decoding messages (the heartbeat) when the server sends
 * no keepalive at all. (Against a real PostgreSQL 15 the walsender's own keepalives advance an
 * idle slot too, so only a scripted stream shows the heartbeat path on its own.)
 */
import type pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { begin, commit, insert, OUTBOX_COLUMNS, relation } from '../../test/support/pgoutput.ts';
import { loadConfig } from '../config/load.ts';
import { AtLeastOnce } from '../delivery/at-least-once.ts';
import { BlockedAggregates } from '../lifecycle/blocked-aggregates.ts';
import { OutboxStore } from '../lifecycle/outbox-store.ts';
import { silentLogger } from '../observability/logger.ts';
import { RelayMetrics } from '../observability/metrics.ts';
import { ReplicationConnection, type StreamHandlers } from '../replication/connection.ts';
import type { Lsn } from '../replication/lsn.ts';
import { OutageLog } from '../retry/outage-log.ts';
import { StdoutSink } from '../sinks/stdout.ts';
import { ReplicationSession } from './session.ts';

/** Records status updates; the test plays the server's side through `handlers`. */
class ScriptedConnection {
  readonly statuses: { received: Lsn; flushed: Lsn }[] = [];
  handlers: StreamHandlers | null = null;
  #end: () => void = () => {};

  stream(_opts: unknown, handlers: StreamHandlers): Promise<void> {
    this.handlers = handlers;
    // The server's CopyBothResponse, once the session has set itself up (as a real one arrives).
    setImmediate(() => handlers.onStreaming?.());
    return new Promise((resolve) => {
      this.#end = resolve;
    });
  }
  sendStatus(received: Lsn, flushed: Lsn): void {
    this.statuses.push({ received, flushed });
  }
  pause(): void {}
  resume(): void {}
  async close(): Promise<void> {
    this.#end();
  }
  get flushed(): Lsn[] {
    return this.statuses.map((s) => s.flushed);
  }
}

// pgoutput (protocol version 1) messages, as the server sends them.
function message(lsn: Lsn, transactional: boolean, prefix = 'pg-outbox-relay-heartbeat'): Buffer {
  const p = Buffer.from(`${prefix}\0`);
  const content = Buffer.from('{}');
  const b = Buffer.alloc(1 + 1 + 8 + p.length + 4 + content.length);
  let o = b.writeUInt8(0x4d, 0); // 'M'
  o = b.writeUInt8(transactional ? 1 : 0, o);
  o = b.writeBigUInt64BE(lsn, o);
  o += p.copy(b, o);
  o = b.writeInt32BE(content.length, o);
  content.copy(b, o);
  return b;
}
async function startSession(startLsn: Lsn) {
  const conn = new ScriptedConnection();
  vi.spyOn(ReplicationConnection, 'open').mockResolvedValue(conn as unknown as ReplicationConnection);
  const { config } = loadConfig(
    'run',
    [
      '--database-url',
      'postgres://relay@localhost/app',
      '--sink',
      'stdout',
      '--status-interval-ms',
      '600000',
    ],
    {},
  );
  const log = silentLogger();
  const session = new ReplicationSession(
    {
      config,
      sink: new StdoutSink(),
      store: new OutboxStore({} as pg.Pool, 'public', 'outbox'),
      blocked: new BlockedAggregates(),
      log,
      metrics: new RelayMetrics(),
      outages: new OutageLog(log),
      delivery: new AtLeastOnce(config),
    },
    startLsn,
  );
  const stop = new AbortController();
  let streaming = false;
  const done = session.run(stop.signal, () => {
    streaming = true;
  });
  await vi.waitFor(() => expect(streaming && conn.handlers).toBeTruthy());
  return { conn, session, stop, done, h: conn.handlers! };
}

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** An XLogData carrying `msg`, as StreamHandlers.onData gets it: the bytes and the message's place. */
function xlog(walStart: bigint, msg: Buffer): [Buffer, number, number] {
  const header = Buffer.alloc(25);
  header[0] = 0x77;
  header.writeBigUInt64BE(walStart, 1);
  const data = Buffer.concat([header, msg]);
  return [data, 25, data.length];
}

describe('replication session: logical decoding messages (heartbeat)', () => {
  it('confirms a non-transactional message position with no keepalive from the server', async () => {
    const s = await startSession(0x1000n);
    s.h.onData(...xlog(0x2000n, message(0x2000n, false)));
    expect(s.conn.flushed).toContain(0x2000n);
    expect(s.session.confirmedLsn).toBe(0x2000n);
    s.stop.abort();
    await s.done;
  });

  it('ignores transactional messages (they belong to their transaction) and never moves backwards', async () => {
    const s = await startSession(0x3000n);
    s.h.onData(...xlog(0x4000n, message(0x4000n, true)));
    expect(s.session.confirmedLsn).toBe(0x3000n);
    s.h.onData(...xlog(0x2000n, message(0x2000n, false)));
    expect(s.session.confirmedLsn).toBe(0x3000n);
    expect(s.conn.flushed.every((f) => f === 0x3000n)).toBe(true);
    s.stop.abort();
    await s.done;
  });

  it('a heartbeat after an empty transaction confirms past both; the transaction alone confirms its end', async () => {
    const s = await startSession(0x1000n);
    s.h.onData(...xlog(0x1800n, begin(0x1900n, 0n, 1234)));
    s.h.onData(...xlog(0x1900n, commit(0x1900n, 0x1950n)));
    expect(s.session.confirmedLsn).toBe(0x1950n);
    s.h.onData(...xlog(0x5000n, message(0x5000n, false)));
    expect(s.session.confirmedLsn).toBe(0x5000n);
    // Status updates go out at most every 50 ms: the last position follows shortly.
    await vi.waitFor(() => expect(s.conn.flushed.at(-1)).toBe(0x5000n));
    s.stop.abort();
    await s.done;
  });
});

describe('replication session: a stop does not wait for the progress linger', () => {
  it("a draining stop records the last published batch at once, not after the recorder's 50 ms linger", async () => {
    const published = vi.spyOn(StdoutSink.prototype, 'publish').mockResolvedValue();
    const recorded = vi.spyOn(OutboxStore.prototype, 'recordProgress').mockResolvedValue(1);
    const s = await startSession(0x1000n);
    // Timers stand still from here: the linger (PROGRESS_LINGER_MS) ends only if the test says so.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const values: Record<string, string | null> = {
      id: '41',
      event_id: '0190f0a4-1c2b-7d3e-8f40-5a6b7c8d9e0f',
      aggregate_type: 'Order',
      aggregate_id: 'order-1',
      event_type: 'OrderPlaced',
      payload: '\\x7b7d',
      content_type: 'application/json',
      headers: '{}',
      traceparent: null,
      created_at: '2026-11-23 01:37:03.123456+00',
      status: 'pending',
      attempts: '0',
    };
    s.h.onData(...xlog(0x1800n, relation(16390, 'public', 'outbox', OUTBOX_COLUMNS)));
    s.h.onData(...xlog(0x1800n, begin(0x1900n, 0n, 1234)));
    const row = OUTBOX_COLUMNS.map(([n]) => values[n] ?? null);
    s.h.onData(...xlog(0x1880n, insert(16390, row)));
    s.h.onData(...xlog(0x1900n, commit(0x1900n, 0x1950n)));
    const turns = () => new Promise((resolve) => setImmediate(resolve));
    for (let i = 0; i < 50 && published.mock.calls.length === 0; i++) await turns();
    for (let i = 0; i < 10; i++) await turns();
    expect(published).toHaveBeenCalledTimes(1);
    // Published, not recorded: a lone event's record waits for more (PROGRESS_LINGER_MS).
    expect(recorded).not.toHaveBeenCalled();
    s.stop.abort();
    // No timer passes: only the stop's drain can end the linger.
    for (let i = 0; i < 20 && recorded.mock.calls.length === 0; i++) await turns();
    expect(recorded.mock.calls[0]?.[1]).toEqual(['41']);
    await vi.advanceTimersByTimeAsync(100); // the drain's own polling (20 ms) sees it settled
    vi.useRealTimers();
    await s.done;
    expect(s.conn.flushed.at(-1)).toBe(0x1950n);
  });
});

describe('replication session: nothing escapes the replication callback', () => {
  it('a message the decoder cannot read ends the session with an error instead of throwing out of the stream handler', async () => {
    const s = await startSession(0x1000n);
    // A truncated BEGIN: the parser throws. Thrown out of onData, it would reach pg's socket
    // handler and end the process (then crash-loop on the same message).
    expect(() => s.h.onData(...xlog(0x1800n, Buffer.from([0x42, 0x00])))).not.toThrow();
    await expect(s.done).rejects.toMatchObject({
      code: 'DATABASE_UNAVAILABLE',
      message: expect.stringMatching(/could not process the replication message at 0\/1800/),
    });
  });
});
