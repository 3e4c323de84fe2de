/** pg_recvlogical to /dev/null: raw pgoutput decoding of a slot up to an LSN (the physical limit), and under the ramp's writer. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type pg from 'pg';
import type { ThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { binaryPossible, pgoutputOptions } from '../src/replication/connection.ts';
import { createSlots, dropSlot } from './backlog.ts';
import { pacedStep, paceWriter, type RampStep } from './live.ts';
import { type PgCpu, PgCpuSampler } from './pg-cpu.ts';
import { sleep } from './proc.ts';
import type { PgContext } from './relay.ts';

export async function drainRecvlogical(
  server: ThrowawayPostgres,
  ctx: PgContext,
  slot: string,
  endLsn: string,
  publication: string,
): Promise<{ seconds: number; pg: PgCpu; options: string[] }> {
  // The relay's pgoutput options (binary values when the relay would ask for them), so that the
  // physical limit decodes what the relay's walsender decodes.
  const binary = await binaryPossible(ctx.db, publication);
  const options = pgoutputOptions({ publication, binary }).flatMap(([name, value]) => [
    '-o',
    `${name}=${value}`,
  ]);
  const sampler = new PgCpuSampler(ctx.postmaster, ctx.exclude, true);
  sampler.start();
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const p = spawn(
      join(server.binDir, 'pg_recvlogical'),
      [
        ...['-d', server.url, '--slot', slot, '--start', '--endpos', endLsn, '--no-loop'],
        ...options,
        ...['-f', '/dev/null'],
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`pg_recvlogical exited ${code}: ${err}`)),
    );
  });
  const seconds = (performance.now() - t0) / 1000;
  // Every walsender of the run is pg_recvlogical's.
  return { seconds, pg: sampler.stop(), options };
}

/**
 * One ramp step of pg_recvlogical (to /dev/null, the relay's pgoutput options) under the live
 * writer, on the floors' table (bench/floors.ts: a publication of its own, so the relay streaming
 * beside it relays none of it). Lag = WAL written − WAL its walsender has decoded and sent
 * (pg_stat_replication.sent_lsn), in events at the step's WAL bytes per commit; the bounded rule
 * is the relay's (live.ts pacedStep).
 */
export async function recvlogicalRampStep(o: {
  server: ThrowawayPostgres;
  db: pg.Client;
  slot: string;
  publication: string;
  insert: { name: string; text: string };
  rate: number;
  seconds: number;
}): Promise<RampStep> {
  await createSlots(o.db, [o.slot]);
  const binary = await binaryPossible(o.db, o.publication);
  const options = pgoutputOptions({ publication: o.publication, binary }).flatMap(([n, v]) => [
    '-o',
    `${n}=${v}`,
  ]);
  const p = spawn(
    join(o.server.binDir, 'pg_recvlogical'),
    ['-d', o.server.url, '--slot', o.slot, '--start', '--no-loop', '-s', '1', ...options, '-f', '/dev/null'],
    { stdio: ['ignore', 'ignore', 'ignore'] },
  );
  const gone = new Promise((r) => p.on('exit', r));
  try {
    let walsender: number | null = null;
    for (let i = 0; walsender === null; i++) {
      if (p.exitCode !== null || i > 300) throw new Error('pg_recvlogical did not start streaming');
      await sleep(50);
      const r = await o.db.query<{ pid: number | null }>(
        'SELECT active_pid AS pid FROM pg_replication_slots WHERE slot_name = $1',
        [o.slot],
      );
      walsender = r.rows[0]?.pid ?? null;
    }
    const positions = async () => {
      const r = await o.db.query<{ written: string; sent: string | null }>(
        `SELECT (pg_current_wal_lsn() - '0/0')::text AS written,
                (SELECT (sent_lsn - '0/0')::text FROM pg_stat_replication WHERE pid = $1) AS sent`,
        [walsender],
      );
      return { written: Number(r.rows[0]!.written), sent: Number(r.rows[0]!.sent ?? 0) };
    };
    const start = (await positions()).written;
    let committed = 0;
    let bytesPerEvent = 600; // until the first commits tell
    const lag = async () => {
      const { written, sent } = await positions();
      if (committed > 100) bytesPerEvent = (written - start) / committed;
      return Math.round(Math.max(0, written - sent) / bytesPerEvent);
    };
    return await pacedStep(o.rate, o.seconds, lag, () =>
      paceWriter(o.server.url, 'Floor', o.rate, o.seconds, () => committed++, undefined, o.insert),
    );
  } finally {
    p.kill('SIGTERM');
    await gone;
    await dropSlot(o.db, o.slot);
  }
}
