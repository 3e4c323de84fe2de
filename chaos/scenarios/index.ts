import type { Scenario } from '../lib/scenario.ts';
import { brokerKill } from './broker-kill.ts';
import { SINK_SCENARIOS } from './broker-sinks.ts';
import { CLUSTER_SCENARIOS } from './cluster-faults.ts';
import { hostileRowsScenario } from './hostile-rows.ts';
import { idleWalChurn } from './idle-wal-churn.ts';
import { kill9Storm } from './kill9-storm.ts';
import { leaderFailover } from './leader-failover.ts';
import { partialRefusal } from './partial-refusal.ts';
import { PG_FAILOVER_SCENARIOS } from './pg-failover.ts';
import { PG_FAILOVER_FAULT_SCENARIOS } from './pg-failover-faults.ts';
import { pgRestart } from './pg-restart.ts';
import { standbyTakeover } from './standby-takeover.ts';
import { visibilityRace } from './visibility-race.ts';

/** In the order `npm run chaos` runs them. */
export const SCENARIOS: Scenario[] = [
  kill9Storm,
  brokerKill,
  leaderFailover,
  pgRestart,
  standbyTakeover,
  hostileRowsScenario,
  partialRefusal,
  visibilityRace,
  idleWalChurn,
  ...CLUSTER_SCENARIOS,
  ...SINK_SCENARIOS,
  ...PG_FAILOVER_SCENARIOS,
  ...PG_FAILOVER_FAULT_SCENARIOS,
];
