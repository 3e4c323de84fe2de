import type { Env } from './env.ts';
import type { KeySeq } from './tally.ts';

/** What a scenario hands back; the runner adds the tally, retained WAL and duration. */
export interface Outcome {
  /** Events the writer committed (the ones that must arrive). */
  written: KeySeq[];
  /** What the separate consumer read back, in partition order. */
  read: KeySeq[];
  /** Broken promises other than loss and order (a row left pending, a relay that exited, …). */
  checks: string[];
  takeoverMs?: number | null;
  recoveryMs?: number | null;
  notes?: string[];
  /** Events read back that the database does not have (a failover to a standby that lagged). */
  phantoms?: number;
  /**
   * Why duplicates are expected even under exactly-once (a failover's table recovery publishes
   * again what the new primary had not recorded): reported, not a failure.
   */
  duplicatesExpected?: string;
}

export interface Scenario {
  name: string;
  summary: string;
  /** Hard bound: past it the scenario is stopped and fails. */
  budgetMs: number;
  run(env: Env): Promise<Outcome>;
}

/** A relay that is still running (not exited, not signalled). */
export function alive(r: { child: { exitCode: number | null; signalCode: string | null } }): boolean {
  return r.child.exitCode === null && r.child.signalCode === null;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
