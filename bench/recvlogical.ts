/** pg_recvlogical to /dev/null: raw pgoutput decoding of a slot up to an LSN (the physical limit). */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { ThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { binaryPossible, pgoutputOptions } from '../src/replication/connection.ts';
import { type PgCpu, PgCpuSampler } from './pg-cpu.ts';
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
