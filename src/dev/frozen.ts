import { readdirSync, readFileSync } from 'node:fs';

/**
 * Resolves once every thread of a SIGSTOPped process is stopped (state T in /proc): SIGSTOP reaches
 * a busy process's threads a moment after kill() returns, and on a loaded machine a request sent
 * at once was still answered. Gives up after ~2 s (the caller's own checks then judge).
 */
export async function untilFrozen(pid: number | undefined): Promise<void> {
  if (!pid) return;
  const stopped = () =>
    readdirSync(`/proc/${pid}/task`).every((t) => {
      const stat = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(') ') + 2).startsWith('T');
    });
  for (let i = 0; i < 200 && !stopped(); i++) await new Promise((r) => setTimeout(r, 10));
}
