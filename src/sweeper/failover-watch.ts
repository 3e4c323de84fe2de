import type pg from 'pg';
import type { Logger } from '../observability/logger.ts';
import type { SlotMetrics } from '../observability/metrics.ts';
import { readFailover } from '../replication/failover.ts';
import type { FailoverFinding, FailoverReport, FailoverState } from '../replication/failover-readiness.ts';

export interface FailoverWatchDeps {
  db: pg.Pool;
  slot: string;
  standbyUrl?: string;
  metrics: SlotMetrics;
  log: Logger;
}

/**
 * Reads the slot's failover readiness and the trap-2 stall at every slot check of the active
 * relay (--slot-check-interval-ms, 10 s: a stall by an inactive named slot is reported at the
 * next check, one seen only as the walsender's wait at the second in a row), exports the
 * outbox_slot_failover_* gauges and logs once per change:
 *  - the stall (error, with its fix) and its end (info: decoding goes on by itself);
 *  - the readiness state (ready: info; not-ready or off: a warning naming why);
 *  - the phantom risk (a warning, once per process).
 * A walsender seen in WaitForStandbyConfirmation in two readings in a row while every named
 * standby slot is active counts as a stall too (a standby that lags or whose receiver is stuck).
 */
export class FailoverWatch {
  readonly #d: FailoverWatchDeps;
  #wasWaiting = false;
  #stalled = false;
  #state: FailoverState | null = null;
  #phantomWarned = false;

  constructor(deps: FailoverWatchDeps) {
    this.#d = deps;
  }

  async check(): Promise<FailoverReport> {
    const { db, slot, standbyUrl, metrics: m, log } = this.#d;
    const { primary, report, waiting } = await readFailover(db, slot, standbyUrl, {
      waitedBefore: this.#wasWaiting,
    });
    this.#wasWaiting = waiting;

    if (report.ready === null) m.failoverReady.reset();
    else m.failoverReady.set(report.ready ? 1 : 0);
    m.failoverStalled.set(report.stalled ? 1 : 0);

    const find = (id: FailoverFinding['id']) => report.findings.find((f) => f.id === id);
    const fields = {
      slot,
      failover: report.state,
      synchronized_standby_slots: primary.synchronizedStandbySlots,
    };
    if (report.stalled && !this.#stalled) {
      const f = find('failover_stalled')!;
      log.error(
        { ...fields, code: 'FAILOVER_STALLED', wait_event: primary.walsenderWaitEvent, fix: f.fix },
        f.text,
      );
    } else if (!report.stalled && this.#stalled) {
      log.info(
        fields,
        'decoding is no longer held by synchronized_standby_slots: the standby confirms WAL again',
      );
    }
    this.#stalled = report.stalled;

    if (report.state !== this.#state) {
      const f = find('failover_not_ready');
      if (report.state === 'ready')
        log.info(fields, "failover ready: the standby's copy of the slot is synced and not temporary");
      else if (report.state === 'unsupported')
        log.info(
          fields,
          `PostgreSQL ${Math.floor(primary.version / 10_000)} has no failover slots (17+): a failover loses the slot, and slot recovery publishes the gap from the table`,
        );
      else if (f) log.warn({ ...fields, fix: f.fix }, f.text);
      else if (report.state === 'unverified')
        log.info(
          fields,
          'failover slot on, synchronized_standby_slots set and its standbys connected; give --standby-url to see the standby’s copy of the slot',
        );
      this.#state = report.state;
    }
    const phantom = find('phantom_risk');
    if (phantom && !this.#phantomWarned) {
      log.warn({ ...fields, fix: phantom.fix }, phantom.text);
      this.#phantomWarned = true;
    }
    return report;
  }
}
