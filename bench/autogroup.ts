/**
 * The kernel's session autogroups during a bench run (docs/benchmarks.md, "Stop 47").
 *
 * With kernel.sched_autogroup_enabled = 1 (Debian's default), the scheduler first splits the CPU
 * between sessions, then between the processes of each. The throwaway PostgreSQL and Kafka are
 * started in sessions of their own (pg_ctl and the dev modules detach them), so PostgreSQL's ten
 * or so busy processes — the live writer's backends, both walsenders, the relay's connections —
 * share one session's share. When the machine is busy, a walsender that fell behind then waits
 * for a CPU for most of a second: in stop 47's runs the relay's walsender waited 92 – 98 % of
 * each 100 ms of its stalls, while the relay itself sent each event within 0.2 ms of receiving
 * it. That is the scheduler's split between the bench's own processes, not a cost of the relay.
 *
 * `--autogroup off` (the default) turns the autogroups off for the run when this process may
 * (root; the knob exists) and puts the previous value back when the run ends, also on an error,
 * SIGINT and SIGTERM; `--autogroup keep` leaves the machine as it is. The report says which it was.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

export const AUTOGROUP_KNOB = '/proc/sys/kernel/sched_autogroup_enabled';

export type AutogroupChoice = 'off' | 'keep';

export interface AutogroupState {
  /** What the report says about it. */
  note: string;
  /** Puts the machine's setting back (idempotent). */
  restore(): void;
}

/** Applies `choice` to `knob` (a path, for tests); restores on restore(), SIGINT, SIGTERM. */
export function applyAutogroup(choice: AutogroupChoice, knob = AUTOGROUP_KNOB): AutogroupState {
  if (!existsSync(knob)) return { note: 'scheduler: no session autogroups on this kernel', restore() {} };
  const before = readFileSync(knob, 'utf8').trim();
  if (before === '0')
    return { note: 'scheduler: session autogroups off (as the machine had them)', restore() {} };
  if (choice === 'keep')
    return {
      note: "scheduler: session autogroups on (--autogroup keep): live latency includes the split of the CPU between the servers' sessions",
      restore() {},
    };
  try {
    writeFileSync(knob, '0');
  } catch (e) {
    return {
      note: `scheduler: session autogroups on — could not turn them off (${(e as Error).message}; run as root, or pass --autogroup keep): live latency includes the split of the CPU between the servers' sessions`,
      restore() {},
    };
  }
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', restore);
    writeFileSync(knob, before);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    restore();
    process.kill(process.pid, signal);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', restore);
  return {
    note: `scheduler: session autogroups turned off for this run (${knob} was ${before}; put back at the end)`,
    restore,
  };
}
