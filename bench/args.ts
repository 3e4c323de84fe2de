/** Flags of `npm run bench` (bench/drain.ts). Small sizes for development: --rows 5000 --live-seconds 5. */
import { parseFlags } from './cli-flags.ts';
import { BROKER_SINKS, type SinkName, sinkInstalled } from './sinks.ts';

const OPTIONS = {
  rows: { type: 'string', default: '100000' },
  'txn-rows': { type: 'string', default: '100' },
  'txn-backlog': { type: 'string', default: '100000' },
  rounds: { type: 'string', default: '3' },
  'big-rows': { type: 'string', default: '200000' },
  'live-rate': { type: 'string', default: '2000' },
  'live-seconds': { type: 'string', default: '60' },
  'live-runs': { type: 'string', default: '5' },
  'live-profile': { type: 'boolean', default: false },
  'ramp-rates': { type: 'string', default: '2000,4000,6000,8000,12000' },
  'ramp-seconds': { type: 'string', default: '8' },
  peer: { type: 'string', default: '' },
  'debezium-poll-ms': { type: 'string', default: '' },
  compression: { type: 'string', default: 'none,gzip,snappy,lz4,zstd' },
  sink: { type: 'string', default: '' },
  'delivery-modes': { type: 'string', default: 'at-least-once,exactly-once' },
  'eos-live-seconds': { type: 'string', default: '15' },
  'relay-from': { type: 'string', default: 'dist' },
  autogroup: { type: 'string', default: 'off' },
} as const;

const values = parseFlags(
  'npm run bench',
  'the relay against pg_recvlogical, a trivial Kafka producer and its peers, one run (docs/benchmarks.md has examples and what each section measures)',
  OPTIONS,
);

function int(name: keyof typeof values): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`--${name} must be a whole number; got "${values[name]}"`);
  return n;
}

if (values.peer && values.peer !== 'debezium')
  throw new Error(`--peer must be "debezium" (or absent); got "${values.peer}"`);

const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];
const compression = (values.compression ?? '').split(',').filter(Boolean);
for (const c of compression)
  if (!CODECS.includes(c)) throw new Error(`--compression takes ${CODECS.join(',')} (or ''); got "${c}"`);
if (compression.length > 0 && !compression.includes('none')) compression.unshift('none');

/**
 * --sink: '' (absent) every section as before, plus the NATS, RabbitMQ, Redis and SQS (ElasticMQ)
 * ones where their servers are installed and the HTTP one; 'kafka' only the Kafka sections;
 * 'nats', 'rabbitmq', 'http', 'redis', 'sqs' or several (comma-separated): those sinks' bulk and
 * live sections beside Kafka's bulk and live figures of the same run, the other sections skipped
 * (compression, single-row backlog, ramp, big transaction, peer).
 */
const SINK_CHOICES = ['kafka', 'nats', 'rabbitmq', 'http', 'redis', 'sqs'];
const sinkFlag = (values.sink ?? '').split(',').filter(Boolean);
for (const s of sinkFlag)
  if (!SINK_CHOICES.includes(s)) throw new Error(`--sink takes ${SINK_CHOICES.join(',')}; got "${s}"`);
const brokerSinks = sinkFlag.filter((s): s is SinkName => s !== 'kafka');
const sinksOnly = brokerSinks.length > 0;

if (values['relay-from'] !== 'dist' && values['relay-from'] !== 'src')
  throw new Error(`--relay-from must be "dist" or "src"; got "${values['relay-from']}"`);

if (values.autogroup !== 'off' && values.autogroup !== 'keep')
  throw new Error(`--autogroup must be "off" or "keep"; got "${values.autogroup}"`);

/** --delivery-modes: without exactly-once, the exactly-once section (bench/eos.ts) is skipped. */
const MODES = ['at-least-once', 'exactly-once'];
const modes = (values['delivery-modes'] ?? '').split(',').filter(Boolean);
for (const m of modes)
  if (!MODES.includes(m)) throw new Error(`--delivery-modes takes ${MODES.join(',')}; got "${m}"`);

export const args = {
  /** Bulk backlog: rows, in transactions of txnRows rows. */
  rows: int('rows'),
  txnRows: int('txn-rows'),
  /** Backlog of single-row transactions. */
  txnBacklog: int('txn-backlog'),
  /** Rounds of each drain (pg_recvlogical, relay → stdout, relay → Kafka); the median round counts. */
  rounds: Math.max(1, int('rounds')),
  /** Rows of the one big transaction whose peak RSS is measured (0: skip). */
  bigRows: int('big-rows'),
  liveRate: int('live-rate'),
  liveSeconds: int('live-seconds'),
  /** Live runs, each a relay pass (the PG floor on its commits) and a Kafka floor pass (alternating which goes first). */
  liveRuns: Math.max(1, int('live-runs')),
  /**
   * The live relay under node --cpu-prof: its CPU split by stage over its passes
   * (bench/live-stages.ts). The profiler's sampling costs the relay CPU: its per-event figures
   * of such a run lean high.
   */
  liveProfile: values['live-profile'],
  rampRates: values['ramp-rates']
    ? values['ramp-rates']
        .split(',')
        .map(Number)
        .filter((n) => n > 0)
    : [],
  rampSeconds: int('ramp-seconds'),
  peer: values.peer === 'debezium' ? ('debezium' as const) : null,
  /** Debezium's poll.interval.ms; empty: its default. */
  debeziumPollMs: values['debezium-poll-ms'] ? int('debezium-poll-ms') : null,
  /** Codecs of the compression section (none always among them, the reference); []: skip it. */
  compression: sinksOnly ? [] : compression,
  /** The broker sinks measured beside Kafka (bulk and live). */
  sinks: sinkFlag.length === 0 ? BROKER_SINKS.filter(sinkInstalled) : brokerSinks,
  /** The exactly-once section: bulk drains beside at-least-once's in each round, and a short live run of each. */
  eos: modes.includes('exactly-once') && !sinksOnly,
  /** Seconds of each mode's live run in that section (0: bulk only). */
  eosLiveSeconds: int('eos-live-seconds'),
  /** --sink nats|rabbitmq|redis: only the bulk and live sections. */
  sinksOnly,
  /** The kernel's session autogroups during the run (bench/autogroup.ts): 'off' for the run, or as they are. */
  autogroup: values.autogroup as 'off' | 'keep',
  /**
   * Which relay runs (bench/relay.ts useRelayFrom): `dist` (default) the compiled CLI, built at
   * start, as the npm package and the image run it; `src` src/cli/main.ts with node's type
   * stripping, whose ~30 MB of RSS no deployed relay carries.
   */
  relayFrom: values['relay-from'] as 'dist' | 'src',
};
if (sinksOnly) Object.assign(args, { txnBacklog: 0, bigRows: 0, rampRates: [], peer: null });
