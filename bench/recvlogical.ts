/** pg_recvlogical to /dev/null: raw pgoutput decoding of a slot up to an LSN (the physical limit). */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { ThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { type PgCpu, PgCpuSampler } from './pg-cpu.ts';
import type { PgContext } from './relay.ts';

export async function drainRecvlogical(
  server: ThrowawayPostgres,
  ctx: PgContext,
  slot: string,
  endLsn: string,
  publication: string,
): Promise<{ seconds: number; pg: PgCpu }> {
  const sampler = new PgCpuSampler(ctx.postmaster, ctx.exclude, true);
  sampler.start();
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const p = spawn(
      join(server.binDir, 'pg_recvlogical'),
      [
        ...['-d', server.url, '--slot', slot, '--start', '--endpos', endLsn, '--no-loop'],
        ...['-o', 'proto_version=1', '-o', `publication_names=${publication}`, '-f', '/dev/null'],
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
  return { seconds, pg: sampler.stop() };
}
