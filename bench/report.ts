/**
 * What `npm run bench` prints: each section as soon as it is measured (a table, every figure with
 * its ratio), and at the end one JSON line with every figure for scripts.
 */

import { DEBEZIUM_TUNING, tuningText } from './debezium.ts';
import type { EosLive } from './eos.ts';
import type { FloorResult } from './floors.ts';
import { LIVE_WARMUP_MAX_SECONDS, LIVE_WARMUP_SECONDS, type LiveResult, type RampStep } from './live.ts';
import { STAGES, type Stage, shares } from './live-stages.ts';
import type { PeerResult } from './peer.ts';
import type { PgCpu } from './pg-cpu.ts';
import type { Drain } from './relay.ts';
import type { SinkName } from './sinks.ts';
import { type Dist, median, medianAndWorst, overFloor, round, us } from './stats.ts';
import type { TrivialRun } from './trivial-producers.ts';

type Value = string | number | boolean | null | object;

const fmtInt = (n: number) => Math.round(n).toLocaleString('en');
const ratio = (n: number) => round(n, 3);

function table(head: string[], rows: (string | number)[][]): void {
  console.log(`\n| ${head.join(' | ')} |`);
  console.log(`|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

function pgSplit(pg: PgCpu, events: number): string {
  // Who the background was, when it is a tenth of a µs or more: a drain's own cost (the WAL writer
  // flushing its statements' commits) or the machine's (autovacuum after the backlog's insert).
  const by = Object.entries(pg.backgroundBy)
    .map(([k, v]) => [k, us(v, events)] as const)
    .filter(([, v]) => v >= 0.1)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v.toFixed(1)}`);
  return `walsender ${us(pg.walsender, events).toFixed(1)} µs, statements ${us(pg.statements, events).toFixed(1)} µs, background ${us(pg.background, events).toFixed(1)} µs${by.length ? ` (${by.join(', ')})` : ''}`;
}

/** One live run: the relay's pass (with the PG floor of its commits) and the Kafka floor's pass, and which went first. */
export type LiveRun = { relay: LiveResult; relayCpu: number; floor: FloorResult; floorFirst: boolean };

type RecvDrain = { seconds: number; pg: PgCpu };
/**
 * `sinks`: the broker sinks' drains of the round (NATS JetStream, RabbitMQ), beside Kafka's;
 * `trivial`: each one's trivial producer (bench/trivial-producers.ts), the same count, same round.
 */
export type BulkRound = {
  recv: RecvDrain;
  stdout: Drain;
  kafka: Drain;
  sinks: Partial<Record<SinkName, Drain>>;
  trivial: Partial<Record<SinkName, TrivialRun>>;
};
/** A broker sink's live run (bench/sinks.ts says what its ack time is). */
export type SinkLive = { name: SinkName; live: LiveResult; relayCpu: number };

const SINK_LABEL: Record<SinkName, string> = {
  nats: 'relay → NATS JetStream (PubAck)',
  rabbitmq: 'relay → RabbitMQ (publisher confirms)',
  http: 'relay → webhook receiver (signed POST, 2xx)',
  redis: 'relay → Redis Streams (dedup script reply)',
  sqs: 'relay → SQS on ElasticMQ (SendMessageBatch; standard queue, in memory)',
};
const TRIVIAL_LABEL: Record<SinkName, string> = {
  nats: 'trivial NATS publisher (nats.js, PubAck; no database)',
  rabbitmq: 'trivial RabbitMQ producer (Java, confirms; no database)',
  http: 'trivial webhook sender (undici, signed, 2xx; no database)',
  redis: 'trivial Redis client (ioredis, the same dedup script; no database)',
  sqs: 'trivial SQS producer (@aws-sdk/client-sqs, batches of 10; no database)',
};
const SINK_ACK: Record<SinkName, string> = {
  nats: "stream message timestamp (the server's, at store, before the PubAck)",
  rabbitmq: 'receipt by a consumer of the quorum queue (confirm time + a delivery hop: an upper bound)',
  http: "the receiver's clock when the request arrived and verified, just before its 204",
  redis: "the entry id's milliseconds (the server's clock at XADD, before the reply)",
  sqs: "the message's SentTimestamp (ElasticMQ's, at store, ms resolution)",
};
export type TxnRound = { recv: RecvDrain; kafka: Drain };
/** One round of the exactly-once section: the bulk drain in each delivery mode, seconds apart. */
export type EosRound = { alo: Drain; eos: Drain };
/** A codec's drains (one per round) and the bytes its topic holds after all of them. */
export type CodecResult = { codec: string; drains: Drain[]; storedBytes: number };

const LIVE_HEAD = [
  'path',
  'events',
  'achieved/s',
  'p50 ms',
  'p90 ms',
  'p99 ms',
  'max ms',
  'missing',
  'relay CPU/event',
];

/** A live run's row: its distribution, missing events, and the relay's CPU over warm-up and measured events. */
const liveRow = (label: string, r: LiveResult, cpu: number) => [
  label,
  r.dist.n,
  fmtInt(r.achievedRate),
  r.dist.p50.toFixed(1),
  r.dist.p90.toFixed(1),
  r.dist.p99.toFixed(1),
  r.dist.max.toFixed(1),
  r.missing,
  `${us(cpu, r.dist.n + r.warmup.n).toFixed(1)} µs`,
];

/**
 * A live run's CPU per event (µs), each process over its own pass, warm-up included: the relay,
 * the Kafka floor's producer (÷ its acked records), the PG floor's reader (÷ its receipts), and
 * the relay's over the sum of the two floors'.
 */
function liveCpu(r: LiveRun): {
  relay: number;
  kafka: number;
  kafkaJit: number;
  pg: number;
  vsFloor: number;
} {
  const relay = us(r.relayCpu, r.relay.dist.n + r.relay.warmup.n);
  const kafka = us(r.floor.cpuSeconds, r.floor.records);
  const kafkaJit = us(r.floor.jitCpuSeconds, r.floor.records);
  const pg = us(r.floor.pgCpuSeconds, r.floor.pgEvents);
  return { relay, kafka, kafkaJit, pg, vsFloor: overFloor(relay, pg, kafka) };
}

const medianCpu = (drains: Drain[]) =>
  [...drains.map((d) => d.cpuSeconds)].sort((a, b) => a - b)[Math.floor(drains.length / 2)]!;

/** The drain of median duration (the upper one of an even count). */
function medianDrain<D extends { seconds: number }>(drains: D[]): D {
  return [...drains].sort((a, b) => a.seconds - b.seconds)[Math.floor(drains.length / 2)]!;
}

function roundsLine(events: number, rounds: Record<string, { seconds: number }>[]): string {
  return rounds
    .map(
      (r, i) =>
        `${i + 1}: ${Object.entries(r)
          .map(([path, d]) => `${path} ${fmtInt(events / d.seconds)}`)
          .join(', ')}`,
    )
    .join('; ');
}

export class Report {
  readonly #json: Record<string, Value> = {};
  #recvBulkRate = 0;
  #kafkaBulkRate = 0;
  #kafkaTxnRate = 0;
  #liveP99 = Number.NaN;
  #kafkaLive: { live: LiveResult; relayCpu: number } | null = null;
  #liveRelayCpu = Number.NaN;

  note(line: string): void {
    console.log(line);
  }

  set(key: string, value: Value): void {
    this.#json[key] = value;
  }

  /**
   * Each path's figures are its median drain over the rounds. `kafkaCold` is the same drain into
   * a broker that had not served a produce since it started (its JIT compiles the produce path
   * meanwhile); the rounds, run after it, are the figures: a production broker is warm.
   */
  bulk(rows: number, rounds: BulkRound[], kafkaCold: Drain): void {
    const recv = medianDrain(rounds.map((r) => r.recv));
    const stdout = medianDrain(rounds.map((r) => r.stdout));
    const kafka = medianDrain(rounds.map((r) => r.kafka));
    const sinks = (Object.keys(rounds[0]?.sinks ?? {}) as SinkName[]).map((name) => ({
      name,
      drain: medianDrain(rounds.map((r) => r.sinks[name]!)),
      trivial: rounds[0]?.trivial[name] ? medianDrain(rounds.map((r) => r.trivial[name]!)) : null,
      // The relay ÷ its broker's trivial producer, per round (seconds apart), then the median.
      vsTrivial: rounds[0]?.trivial[name]
        ? median(rounds.map((r) => r.trivial[name]!.seconds / r.sinks[name]!.seconds))
        : Number.NaN,
    }));
    const rRecv = rows / recv.seconds;
    const rStdout = rows / stdout.seconds;
    const rKafka = rows / kafka.seconds;
    const rCold = rows / kafkaCold.seconds;
    this.#recvBulkRate = rRecv;
    this.#kafkaBulkRate = rKafka;
    console.log(`\n## Drain: bulk backlog (${fmtInt(rows)} rows), median of ${rounds.length} rounds`);
    table(
      [
        'path',
        'events/s',
        'seconds',
        'vs pg_recvlogical',
        'relay CPU/event',
        'relay peak RSS',
        'PG CPU/event',
      ],
      [
        [
          'pg_recvlogical (raw decode, /dev/null)',
          fmtInt(rRecv),
          recv.seconds.toFixed(2),
          '100 %',
          '—',
          '—',
          pgSplit(recv.pg, rows),
        ],
        [
          'relay → stdout (/dev/null)',
          fmtInt(rStdout),
          stdout.seconds.toFixed(2),
          `${((rStdout / rRecv) * 100).toFixed(0)} %`,
          `${us(stdout.cpuSeconds, rows).toFixed(1)} µs`,
          `${stdout.peakRssMb.toFixed(0)} MB`,
          pgSplit(stdout.pg, rows),
        ],
        [
          'relay → Kafka (acks=all), broker cold',
          fmtInt(rCold),
          kafkaCold.seconds.toFixed(2),
          `${((rCold / rRecv) * 100).toFixed(0)} %`,
          `${us(kafkaCold.cpuSeconds, rows).toFixed(1)} µs`,
          `${kafkaCold.peakRssMb.toFixed(0)} MB`,
          pgSplit(kafkaCold.pg, rows),
        ],
        [
          'relay → Kafka (acks=all)',
          fmtInt(rKafka),
          kafka.seconds.toFixed(2),
          `${((rKafka / rRecv) * 100).toFixed(0)} %`,
          `${us(kafka.cpuSeconds, rows).toFixed(1)} µs`,
          `${kafka.peakRssMb.toFixed(0)} MB`,
          pgSplit(kafka.pg, rows),
        ],
        ...sinks.flatMap(({ name, drain: d, trivial: t }) => [
          [
            SINK_LABEL[name],
            fmtInt(rows / d.seconds),
            d.seconds.toFixed(2),
            `${((rows / d.seconds / rRecv) * 100).toFixed(0)} %`,
            `${us(d.cpuSeconds, rows).toFixed(1)} µs`,
            `${d.peakRssMb.toFixed(0)} MB`,
            pgSplit(d.pg, rows),
          ],
          ...(t
            ? [
                [
                  TRIVIAL_LABEL[name],
                  fmtInt(rows / t.seconds),
                  t.seconds.toFixed(2),
                  `${((rows / t.seconds / rRecv) * 100).toFixed(0)} %`,
                  `${us(t.cpuSeconds, rows).toFixed(1)} µs (producer)`,
                  '—',
                  '—',
                ],
              ]
            : []),
        ]),
      ],
    );
    if (sinks.length > 0)
      console.log(
        `\nBroker sinks (the server's CPU per event during the median drain): ${sinks
          .map(({ name, drain: d }) => `${name} ${us(d.brokerCpuSeconds, rows).toFixed(1)} µs`)
          .join(
            ', ',
          )}; Kafka ${us(kafka.brokerCpuSeconds, rows).toFixed(1)} µs. Each sink's first drain into its fresh server ran before the rounds and is not counted.`,
      );
    for (const { name, trivial: t, vsTrivial, drain: d } of sinks)
      if (t)
        console.log(
          `\n${name}: the relay drains at ${vsTrivial.toFixed(2)} × its broker's trivial producer (median of the rounds' own ratios; ${fmtInt(rows / t.seconds)} vs ${fmtInt(rows / d.seconds)} events/s in the median runs); the server spent ${us(t.brokerCpuSeconds, rows).toFixed(1)} µs/event under the trivial producer, ${us(d.brokerCpuSeconds, rows).toFixed(1)} under the relay. The trivial producer: the relay's message size and headers, acknowledgement rule and in-flight window, no database, no per-key order; one uncounted run before the rounds.`,
        );
    for (const { name, trivial: t, vsTrivial } of sinks)
      if (t)
        Object.assign(this.#json, {
          [`${name}_trivial_bulk_events_per_s`]: Math.round(rows / t.seconds),
          [`${name}_trivial_vs_recvlogical_bulk`]: ratio(rows / t.seconds / rRecv),
          [`${name}_vs_trivial_bulk`]: ratio(vsTrivial),
          [`${name}_trivial_cpu_us_per_event`]: round(us(t.cpuSeconds, rows)),
          [`${name}_trivial_broker_cpu_us_per_event`]: round(us(t.brokerCpuSeconds, rows)),
        });
    for (const { name, drain: d } of sinks)
      Object.assign(this.#json, {
        [`${name}_bulk_events_per_s`]: Math.round(rows / d.seconds),
        [`${name}_vs_recvlogical_bulk`]: ratio(rows / d.seconds / rRecv),
        [`${name}_vs_kafka_bulk`]: ratio(rows / d.seconds / rKafka),
        [`${name}_relay_cpu_us_per_event`]: round(us(d.cpuSeconds, rows)),
        [`${name}_broker_cpu_us_per_event`]: round(us(d.brokerCpuSeconds, rows)),
        [`${name}_peak_rss_mb`]: Math.round(d.peakRssMb),
      });
    const overhead = kafka.pg.statements / kafka.pg.walsender;
    console.log(
      `\nPostgreSQL during the Kafka drain: the relay's statements cost ${overhead.toFixed(2)} × the walsender's decoding (pg_overhead_vs_decode); ` +
        `pg_recvlogical's walsender: ${us(recv.pg.walsender, rows).toFixed(1)} µs/event. Relay seconds run from "streaming from the slot" to confirmed_flush_lsn ≥ end ` +
        `(with process start: stdout ${stdout.withStartup.toFixed(2)} s, kafka ${kafka.withStartup.toFixed(2)} s). ` +
        `The Kafka broker spent ${us(kafka.brokerCpuSeconds, rows).toFixed(1)} µs/event during the Kafka drain; the relay was busy ${((kafka.cpuSeconds / kafka.seconds) * 100).toFixed(0)} % of the drain's wall time. ` +
        `"Broker cold": the same drain, first, into a broker that had not served a produce since it started (${us(kafkaCold.brokerCpuSeconds, rows).toFixed(1)} µs/event of broker CPU while its JIT compiles); the figures are the warm ones after it.`,
    );
    console.log(
      `\nRounds (events/s): ${roundsLine(
        rows,
        rounds.map(({ sinks, trivial, ...r }) => ({
          ...r,
          ...(sinks as Record<string, Drain>),
          ...Object.fromEntries(Object.entries(trivial).map(([n, t]) => [`${n} trivial`, t])),
        })),
      )}`,
    );
    Object.assign(this.#json, {
      rows,
      recvlogical_bulk_events_per_s: Math.round(rRecv),
      stdout_bulk_events_per_s: Math.round(rStdout),
      kafka_bulk_events_per_s: Math.round(rKafka),
      stdout_vs_recvlogical_bulk: ratio(rStdout / rRecv),
      kafka_vs_recvlogical_bulk: ratio(rKafka / rRecv),
      kafka_bulk_cold_events_per_s: Math.round(rCold),
      kafka_vs_recvlogical_bulk_cold: ratio(rCold / rRecv),
      kafka_cold_broker_cpu_us_per_event: round(us(kafkaCold.brokerCpuSeconds, rows)),
      kafka_relay_cpu_us_per_event: round(us(kafka.cpuSeconds, rows)),
      stdout_relay_cpu_us_per_event: round(us(stdout.cpuSeconds, rows)),
      kafka_peak_rss_mb: Math.round(kafka.peakRssMb),
      kafka_broker_cpu_us_per_event: round(us(kafka.brokerCpuSeconds, rows)),
      kafka_relay_busy_share: ratio(kafka.cpuSeconds / kafka.seconds),
      stdout_peak_rss_mb: Math.round(stdout.peakRssMb),
      pg_walsender_cpu_us_per_event: round(us(kafka.pg.walsender, rows)),
      pg_statements_cpu_us_per_event: round(us(kafka.pg.statements, rows)),
      pg_background_cpu_us_per_event: round(us(kafka.pg.background, rows)),
      pg_overhead_vs_decode: ratio(overhead),
      recvlogical_walsender_cpu_us_per_event: round(us(recv.pg.walsender, rows)),
      stdout_pg_overhead_vs_decode: ratio(stdout.pg.statements / stdout.pg.walsender),
      bulk_rounds: rounds.map((r) => ({
        recvlogical: Math.round(rows / r.recv.seconds),
        stdout: Math.round(rows / r.stdout.seconds),
        kafka: Math.round(rows / r.kafka.seconds),
        ...Object.fromEntries(Object.entries(r.sinks).map(([n, d]) => [n, Math.round(rows / d.seconds)])),
        ...Object.fromEntries(
          Object.entries(r.trivial).map(([n, t]) => [`${n}_trivial`, Math.round(rows / t.seconds)]),
        ),
      })),
    });
  }

  /**
   * The compression section: per codec, the median round's bulk drain (÷ pg_recvlogical's of the
   * bulk section, ÷ none's of this one), relay CPU per event (and over none's), bytes per event
   * of the record batches the broker stored.
   */
  compression(rows: number, codecs: CodecResult[]): void {
    const none = codecs.find((c) => c.codec === 'none')!;
    const noneDrain = medianDrain(none.drains);
    const noneCpu = us(medianCpu(none.drains), rows);
    console.log(
      `\n## Compression: bulk backlog (${fmtInt(rows)} rows) into Kafka per codec, median of ${none.drains.length} rounds`,
    );
    const out: Record<string, object> = {};
    const rowsOut = codecs.map((c) => {
      const d = medianDrain(c.drains);
      const rate = rows / d.seconds;
      const cpu = us(medianCpu(c.drains), rows);
      const bytes = c.storedBytes / (rows * c.drains.length);
      out[c.codec] = {
        events_per_s: Math.round(rate),
        vs_recvlogical_bulk: ratio(rate / this.#recvBulkRate),
        vs_none_bulk: ratio(noneDrain.seconds / d.seconds),
        relay_cpu_us_per_event: round(cpu),
        relay_cpu_us_over_none: round(cpu - noneCpu),
        bytes_per_event: round(bytes),
        rounds: c.drains.map((x) => Math.round(rows / x.seconds)),
      };
      return [
        c.codec,
        fmtInt(rate),
        `${((rate / this.#recvBulkRate) * 100).toFixed(0)} %`,
        `${((noneDrain.seconds / d.seconds) * 100).toFixed(0)} %`,
        `${cpu.toFixed(1)} µs`,
        c.codec === 'none' ? '—' : `${cpu - noneCpu >= 0 ? '+' : ''}${(cpu - noneCpu).toFixed(1)} µs`,
        `${bytes.toFixed(1)} B`,
      ];
    });
    table(
      [
        'codec',
        'events/s',
        'vs pg_recvlogical',
        'vs none',
        'relay CPU/event',
        'over none',
        'bytes/event stored',
      ],
      rowsOut,
    );
    console.log(
      '\nBytes per event: the record batches as the broker stored them (the topic keeps the producer’s codec), i.e. as sent less the Produce framing. The bench payloads (digits padded with "x") compress far better than real events: read the bytes as an upper bound of what a codec saves.',
    );
    const get = (codec: string) => out[codec] as Record<string, number> | undefined;
    Object.assign(this.#json, {
      compression: out,
      ...(get('zstd')
        ? { zstd_vs_none_bulk: get('zstd')!.vs_none_bulk, zstd_bytes_per_event: get('zstd')!.bytes_per_event }
        : {}),
      ...(get('lz4') ? { lz4_vs_none_bulk: get('lz4')!.vs_none_bulk } : {}),
    });
  }

  txn(count: number, rounds: TxnRound[]): void {
    const recv = medianDrain(rounds.map((r) => r.recv));
    const kafka = medianDrain(rounds.map((r) => r.kafka));
    const rRecv = count / recv.seconds;
    const rKafka = count / kafka.seconds;
    this.#kafkaTxnRate = rKafka;
    console.log(`\n## Drain: single-row transactions (${fmtInt(count)}), median of ${rounds.length} rounds`);
    table(
      ['path', 'events/s', 'seconds', 'vs pg_recvlogical', 'relay CPU/event', 'PG CPU/event'],
      [
        ['pg_recvlogical', fmtInt(rRecv), recv.seconds.toFixed(2), '100 %', '—', pgSplit(recv.pg, count)],
        [
          'relay → Kafka (acks=all)',
          fmtInt(rKafka),
          kafka.seconds.toFixed(2),
          `${((rKafka / rRecv) * 100).toFixed(0)} %`,
          `${us(kafka.cpuSeconds, count).toFixed(1)} µs`,
          pgSplit(kafka.pg, count),
        ],
      ],
    );
    Object.assign(this.#json, {
      txn_backlog: count,
      recvlogical_txn_events_per_s: Math.round(rRecv),
      kafka_txn_events_per_s: Math.round(rKafka),
      kafka_vs_recvlogical_txn: ratio(rKafka / rRecv),
      kafka_txn_relay_cpu_us_per_event: round(us(kafka.cpuSeconds, count)),
      txn_pg_overhead_vs_decode: ratio(kafka.pg.statements / kafka.pg.walsender),
      txn_rounds: rounds.map((r) => ({
        recvlogical: Math.round(count / r.recv.seconds),
        kafka: Math.round(count / r.kafka.seconds),
      })),
    });
    console.log(`\nRounds (events/s): ${roundsLine(count, rounds)}`);
  }

  /**
   * The live runs: each a relay pass (the PG floor measured on its own commits) and a Kafka floor
   * pass (bench/floors.ts), in alternating order. Per run, the relay's p50 / p99 / max over the
   * sum of the floors' (PG commit → receipt + Kafka send → ack); the JSON's `live_*_vs_floor` is
   * the worst run, `…_median` the median run. The absolute `live_*_ms` keys are the run of median
   * p99's.
   */
  live(rate: number, seconds: number, runs: LiveRun[]): void {
    const vs = (r: LiveRun, k: 'p50' | 'p99' | 'max') =>
      overFloor(r.relay.dist[k], r.floor.pg[k], r.floor.kafka[k]);
    const byP99 = [...runs].sort((a, b) => a.relay.dist.p99 - b.relay.dist.p99);
    const mid = byP99[Math.floor((byP99.length - 1) / 2)]!;
    this.#liveP99 = mid.relay.dist.p99;
    this.#kafkaLive = { live: mid.relay, relayCpu: mid.relayCpu };
    const ms = (d: Dist) => `${d.p50.toFixed(1)} / ${d.p99.toFixed(1)} / ${d.max.toFixed(1)}`;
    console.log(
      `\n## Live: ${fmtInt(rate)} single-row commits/s, ${runs.length} runs of ${seconds} s measured after a warm-up; relay commit → broker append (LogAppendTime) vs the floors: PG commit → receipt by a reader doing nothing, on a slot of its own, of the same commits + Kafka send → ack of Kafka's own producer, in a pass of its own`,
    );
    table(
      [
        'run',
        'first',
        'relay p50 / p99 / max ms',
        'PG floor',
        'Kafka floor',
        'p99 ÷ floor',
        'max ÷ floor',
        'warm-up s (relay, Kafka floor)',
        'missing',
        'PG floor after relay',
        'relay after PG floor',
        'relay CPU/event',
        'Kafka floor, PG floor CPU/event',
        'CPU ÷ floors',
      ],
      runs.map((r, i) => [
        i + 1,
        r.floorFirst ? 'Kafka floor' : 'relay',
        ms(r.relay.dist),
        ms(r.floor.pg),
        ms(r.floor.kafka),
        vs(r, 'p99').toFixed(2),
        vs(r, 'max').toFixed(2),
        `${r.relay.warmupSeconds.toFixed(0)}, ${r.floor.warmupSeconds.toFixed(0)}`,
        `${r.relay.missing} (PG floor ${r.floor.pgMissing})`,
        r.floor.pgLate,
        ms(r.floor.afterPg),
        `${us(r.relayCpu, r.relay.dist.n + r.relay.warmup.n).toFixed(1)} µs`,
        `${liveCpu(r).kafka.toFixed(1)}, ${liveCpu(r).pg.toFixed(1)} µs`,
        liveCpu(r).vsFloor.toFixed(2),
      ]),
    );
    const p99 = medianAndWorst(runs.map((r) => vs(r, 'p99')));
    const max = medianAndWorst(runs.map((r) => vs(r, 'max')));
    const p50 = medianAndWorst(runs.map((r) => vs(r, 'p50')));
    const ownP99 = medianAndWorst(runs.map((r) => r.floor.afterPg.p99 / r.floor.kafka.p99));
    console.log(
      `\nrelay ÷ floors: p99 median ${p99.median.toFixed(2)}, worst ${p99.worst.toFixed(2)} (target ≤ 1.5); max median ${max.median.toFixed(2)}, worst ${max.worst.toFixed(2)} (target ≤ 2). ` +
        `Warm-up rule for each pass: at least ${LIVE_WARMUP_SECONDS} s, then until the JVMs' JIT compilers (the broker's; in the Kafka floor's pass its producer's too) were under 5 % of a core for 3 s in a row, at most ${LIVE_WARMUP_MAX_SECONDS} s. ` +
        `The Kafka floor ends at the producer's ack (the broker's append plus the response), the relay's figure at the append: the floor's sum leans high by a response's trip. "PG floor after relay": measured events the PG floor's reader received after the broker had appended the relay's record. ` +
        `"Relay after PG floor": per event, the broker's append of the relay's record minus the PG floor reader's receipt of its commit — what the relay and the broker add to what PostgreSQL delivered at that moment; its p99 ÷ the Kafka floor's p99: median ${ownP99.median.toFixed(2)}, worst ${ownP99.worst.toFixed(2)} (over 1: the relay and its Produce requests add more to the tail than Kafka's own producer does; under 1, the relay's tail is PostgreSQL's delivery plus a Kafka floor's).`,
    );
    const cpu = runs.map(liveCpu);
    const cpuVs = medianAndWorst(cpu.map((c) => c.vsFloor));
    this.#liveRelayCpu = median(cpu.map((c) => c.relay));
    console.log(
      `\nCPU per event, each process's user + sys over its pass (warm-up included) ÷ the events it carried: relay median ${this.#liveRelayCpu.toFixed(1)} µs; Kafka floor producer (KafkaFloor.java, its whole JVM) median ${median(cpu.map((c) => c.kafka)).toFixed(1)} µs, of which its JIT compiler threads ${median(cpu.map((c) => c.kafkaJit)).toFixed(1)} µs; PG floor reader median ${median(cpu.map((c) => c.pg)).toFixed(1)} µs. ` +
        `Relay ÷ (Kafka producer + PG reader): median ${cpuVs.median.toFixed(2)}, worst ${cpuVs.worst.toFixed(2)} (target ≤ 1: one process doing both floors' jobs).`,
    );
    const d = mid.relay;
    Object.assign(this.#json, {
      live_kafka_floor_cpu_us_per_event: round(median(cpu.map((c) => c.kafka))),
      live_kafka_floor_jit_cpu_us_per_event: round(median(cpu.map((c) => c.kafkaJit))),
      live_pg_floor_cpu_us_per_event: round(median(cpu.map((c) => c.pg))),
      live_relay_cpu_vs_floor: ratio(cpuVs.median),
      live_relay_cpu_vs_floor_worst: ratio(cpuVs.worst),
      live_warmup_max_ms: round(d.warmup.max),
      live_warmup_seconds: round(d.warmupSeconds),
      live_rate: rate,
      live_seconds: seconds,
      live_runs: runs.length,
      live_achieved_rate: Math.round(d.achievedRate),
      live_p50_ms: round(d.dist.p50),
      live_p90_ms: round(d.dist.p90),
      live_p99_ms: round(d.dist.p99),
      live_max_ms: round(d.dist.max),
      live_missing: runs.reduce((n, r) => n + r.relay.missing, 0),
      live_relay_cpu_us_per_event: round(us(mid.relayCpu, d.dist.n + d.warmup.n)),
      live_p99_vs_floor: ratio(p99.worst),
      live_p99_vs_floor_median: ratio(p99.median),
      live_max_vs_floor: ratio(max.worst),
      live_max_vs_floor_median: ratio(max.median),
      live_p50_vs_floor_median: ratio(p50.median),
      live_after_pg_p99_vs_kafka_floor: ratio(ownP99.median),
      live_after_pg_p99_vs_kafka_floor_worst: ratio(ownP99.worst),
      live_floor_runs: runs.map((r) => ({
        floor_first: r.floorFirst,
        relay_ms: [round(r.relay.dist.p50, 2), round(r.relay.dist.p99, 2), round(r.relay.dist.max, 2)],
        pg_floor_ms: [round(r.floor.pg.p50, 2), round(r.floor.pg.p99, 2), round(r.floor.pg.max, 2)],
        kafka_floor_ms: [
          round(r.floor.kafka.p50, 2),
          round(r.floor.kafka.p99, 2),
          round(r.floor.kafka.max, 2),
        ],
        pg_floor_after_relay: r.floor.pgLate,
        relay_after_pg_floor_ms: [
          round(r.floor.afterPg.p50, 2),
          round(r.floor.afterPg.p99, 2),
          round(r.floor.afterPg.max, 2),
        ],
        relay_cpu_us_per_event: round(liveCpu(r).relay),
        kafka_floor_cpu_us_per_event: round(liveCpu(r).kafka),
        kafka_floor_jit_cpu_us_per_event: round(liveCpu(r).kafkaJit),
        pg_floor_cpu_us_per_event: round(liveCpu(r).pg),
        relay_cpu_vs_floor: ratio(liveCpu(r).vsFloor),
        p99_vs_floor: ratio(vs(r, 'p99')),
        max_vs_floor: ratio(vs(r, 'max')),
      })),
    });
  }

  /**
   * The live relay's CPU by stage (bench/live-stages.ts), from its profile over the live runs'
   * relay passes: each stage's share of the main thread's busy samples, and that share of the
   * relay's median CPU per live event. The profile samples only the JavaScript thread: CPU of
   * V8's helper threads (concurrent GC, compilers) and libuv's is in the CPU per event, not in
   * the samples, and the shares scale it as if it were spread like them.
   */
  liveStages(times: Record<Stage, number>): void {
    const share = shares(times);
    const sampled = STAGES.reduce((n, s) => n + times[s], 0) / 1e6;
    console.log(
      `\n## Live relay CPU by stage (node --cpu-prof over the relay passes, ${sampled.toFixed(1)} s of busy samples; the profiler's own cost is in the CPU per event of this run)`,
    );
    table(
      ['stage', 'share of busy samples', 'µs/event (share × relay CPU/event)'],
      STAGES.map((s) => [s, `${(share[s] * 100).toFixed(1)} %`, (share[s] * this.#liveRelayCpu).toFixed(1)]),
    );
    Object.assign(this.#json, {
      live_relay_stage_share: Object.fromEntries(STAGES.map((s) => [s, round(share[s], 3)])),
      live_relay_stage_us_per_event: Object.fromEntries(
        STAGES.map((s) => [s, round(share[s] * this.#liveRelayCpu)]),
      ),
    });
  }

  /**
   * Exactly-once vs at-least-once bulk drains (bench/eos.ts): the ratio is the median of the
   * rounds' own ratios (drains seconds apart); rates and CPU are each mode's median drain.
   */
  eosBulk(rows: number, rounds: EosRound[]): void {
    const alo = medianDrain(rounds.map((r) => r.alo));
    const eos = medianDrain(rounds.map((r) => r.eos));
    const vs = median(rounds.map((r) => r.alo.seconds / r.eos.seconds));
    console.log(
      `\n## Exactly-once: bulk backlog (${fmtInt(rows)} rows), --delivery exactly-once beside at-least-once in each round, median of ${rounds.length} rounds`,
    );
    table(
      ['path', 'events/s', 'vs at-least-once', 'relay CPU/event', 'broker CPU/event'],
      [
        [
          'relay → Kafka, at-least-once',
          fmtInt(rows / alo.seconds),
          '1.00',
          `${us(alo.cpuSeconds, rows).toFixed(1)} µs`,
          `${us(alo.brokerCpuSeconds, rows).toFixed(1)} µs`,
        ],
        [
          'relay → Kafka, exactly-once',
          fmtInt(rows / eos.seconds),
          vs.toFixed(2),
          `${us(eos.cpuSeconds, rows).toFixed(1)} µs`,
          `${us(eos.brokerCpuSeconds, rows).toFixed(1)} µs`,
        ],
      ],
    );
    console.log(
      `\nRounds (events/s): ${roundsLine(
        rows,
        rounds.map((r) => ({ 'at-least-once': r.alo, 'exactly-once': r.eos })),
      )}`,
    );
    Object.assign(this.#json, {
      eos_vs_alo_bulk: ratio(vs),
      eos_bulk_events_per_s: Math.round(rows / eos.seconds),
      alo_bulk_events_per_s: Math.round(rows / alo.seconds),
      eos_relay_cpu_us_per_event: round(us(eos.cpuSeconds, rows)),
      alo_relay_cpu_us_per_event: round(us(alo.cpuSeconds, rows)),
      eos_broker_cpu_us_per_event: round(us(eos.brokerCpuSeconds, rows)),
      alo_broker_cpu_us_per_event: round(us(alo.brokerCpuSeconds, rows)),
      eos_bulk_rounds: rounds.map((r) => ({
        alo: Math.round(rows / r.alo.seconds),
        eos: Math.round(rows / r.eos.seconds),
      })),
    });
  }

  /** Each delivery mode's short live run, ack = receipt by a read_committed consumer (bench/eos.ts). */
  eosLive(rate: number, seconds: number, runs: EosLive): void {
    console.log(
      `\n## Exactly-once: live, ${fmtInt(rate)} single-row commits/s for ${seconds} s per mode (one relay at a time), commit → receipt by a read_committed consumer`,
    );
    table(LIVE_HEAD, [
      liveRow('relay → Kafka, at-least-once', runs.alo.live, runs.alo.relayCpu),
      liveRow('relay → Kafka, exactly-once', runs.eos.live, runs.eos.relayCpu),
    ]);
    for (const [mode, { live: r, relayCpu }] of Object.entries(runs))
      Object.assign(this.#json, {
        [`${mode}_live_p50_ms`]: round(r.dist.p50),
        [`${mode}_live_p99_ms`]: round(r.dist.p99),
        [`${mode}_live_max_ms`]: round(r.dist.max),
        [`${mode}_live_missing`]: r.missing,
        [`${mode}_live_duplicates`]: r.duplicates,
        [`${mode}_live_relay_cpu_us_per_event`]: round(us(relayCpu, r.dist.n + r.warmup.n)),
      });
    this.#json.eos_live_seconds = seconds;
  }

  /** The broker sinks' live runs, each after the one before on its own relay, beside Kafka's of this run. */
  sinksLive(rate: number, seconds: number, runs: SinkLive[]): void {
    if (runs.length === 0) return;
    console.log(
      `\n## Live per sink: ${fmtInt(rate)} single-row commits/s for ${seconds} s each (one relay at a time), commit → broker ack`,
    );
    const k = this.#kafkaLive;
    table(LIVE_HEAD, [
      ...(k ? [liveRow('relay → Kafka (LogAppendTime)', k.live, k.relayCpu)] : []),
      ...runs.map((s) => liveRow(SINK_LABEL[s.name], s.live, s.relayCpu)),
    ]);
    console.log(
      `\nAck time: ${runs.map((s) => `${s.name}: ${SINK_ACK[s.name]}`).join('; ')}. Warm-up ${LIVE_WARMUP_SECONDS} s at the same rate before each (no JVM to wait for), not counted.`,
    );
    for (const { name, live: r, relayCpu } of runs)
      Object.assign(this.#json, {
        [`${name}_live_p50_ms`]: round(r.dist.p50),
        [`${name}_live_p90_ms`]: round(r.dist.p90),
        [`${name}_live_p99_ms`]: round(r.dist.p99),
        [`${name}_live_max_ms`]: round(r.dist.max),
        [`${name}_live_missing`]: r.missing,
        [`${name}_live_duplicates`]: r.duplicates,
        [`${name}_live_achieved_rate`]: Math.round(r.achievedRate),
        [`${name}_live_relay_cpu_us_per_event`]: round(us(relayCpu, r.dist.n + r.warmup.n)),
      });
  }

  /**
   * The ramp: the relay's steps and pg_recvlogical's under the same writer (at each rate right
   * after the relay's). `steady_rate_vs_recvlogical` = the relay's highest bounded rate ÷ the
   * highest at which the writer and pg_recvlogical kept up.
   */
  ramp(steps: RampStep[], recv: RampStep[], seconds: number): void {
    console.log(
      `\n## Ramp: ${seconds} s per step; bounded = writer kept up, lag not growing, all through 1 s after the last commit`,
    );
    const byRate = new Map(recv.map((s) => [s.rate, s]));
    const rates = [...new Set([...steps.map((s) => s.rate), ...recv.map((s) => s.rate)])];
    const writerLimited = (s: RampStep | undefined) => s !== undefined && s.achieved < s.rate * 0.9;
    const cells = (s: RampStep | undefined) =>
      s
        ? [
            fmtInt(s.achieved),
            s.maxLag,
            s.lagAfter1s,
            s.bounded ? 'yes' : writerLimited(s) ? 'no (writer)' : 'no',
          ]
        : ['—', '—', '—', '—'];
    table(
      [
        'target/s',
        'relay: achieved/s',
        'max lag (events)',
        'lag 1 s after',
        'bounded',
        'pg_recvlogical: achieved/s',
        'max lag',
        'lag 1 s after',
        'bounded',
      ],
      rates.map((rate) => [
        fmtInt(rate),
        ...cells(steps.find((s) => s.rate === rate)),
        ...cells(byRate.get(rate)),
      ]),
    );
    const best = steps.filter((s) => s.bounded).at(-1);
    const recvBest = recv.filter((s) => s.bounded).at(-1);
    const last = steps.at(-1);
    const relayWriterLimited = writerLimited(last);
    // Each side stops at its first unbounded step: when that step's writer fell behind, the
    // ratio measured the writer in that step, not the reader.
    const recvWriterLimited = writerLimited(recv.at(-1)) && recv.at(-1)?.bounded === false;
    const relative = best && recvBest ? best.achieved / recvBest.achieved : Number.NaN;
    console.log(
      `highest steady rate with bounded lag: relay ${best ? fmtInt(best.achieved) : 'none'} events/s, pg_recvlogical ${recvBest ? fmtInt(recvBest.achieved) : 'none'} → ${relative.toFixed(2)} (steady_rate_vs_recvlogical, target ≥ 0.9)` +
        (relayWriterLimited
          ? ` (the relay's next step was limited by the writer and PostgreSQL: ${fmtInt(last!.achieved)}/s committed)`
          : '') +
        (recvWriterLimited
          ? ` (pg_recvlogical's next step was limited by the writer: ${fmtInt(recv.at(-1)!.achieved)}/s committed; the ratio then measures the writer)`
          : ''),
    );
    Object.assign(this.#json, {
      live_max_steady_rate: best ? Math.round(best.achieved) : 0,
      recvlogical_max_steady_rate: recvBest ? Math.round(recvBest.achieved) : 0,
      steady_rate_vs_recvlogical: ratio(relative),
      live_ramp_writer_limited: relayWriterLimited,
      recvlogical_ramp_writer_limited: recvWriterLimited,
      live_ramp: steps.map((s) => ({
        rate: s.rate,
        achieved: Math.round(s.achieved),
        max_lag: s.maxLag,
        bounded: s.bounded,
      })),
      recvlogical_ramp: recv.map((s) => ({
        rate: s.rate,
        achieved: Math.round(s.achieved),
        max_lag: s.maxLag,
        bounded: s.bounded,
      })),
    });
  }

  big(rows: number, d: Drain): void {
    console.log(
      `\n## One ${fmtInt(rows)}-row transaction → Kafka: peak RSS ${d.peakRssMb.toFixed(0)} MB, ${fmtInt(rows / d.seconds)} events/s, relay CPU ${us(d.cpuSeconds, rows).toFixed(1)} µs/event`,
    );
    Object.assign(this.#json, {
      big_rows: rows,
      rss_200k_txn_mb: Math.round(d.peakRssMb),
      big_txn_events_per_s: Math.round(rows / d.seconds),
    });
  }

  /** Debezium with its defaults (`debezium_*`) and tuned for throughput (`debezium_tuned_*`). */
  peer(p: PeerResult, tuned: PeerResult): void {
    const rows = this.#json.rows as number;
    const txn = this.#json.txn_backlog as number;
    console.log(
      `\n## Debezium ${p.version} (Kafka Connect standalone, Outbox Event Router), same backlogs, PostgreSQL and broker; defaults, then tuned: ${tuningText(DEBEZIUM_TUNING)}`,
    );
    const rowsOf = (d: PeerResult) => {
      const bulk = rows / d.bulkSeconds;
      const single = txn / d.txnSeconds;
      const name = d.tuned ? 'Debezium tuned' : 'Debezium defaults';
      return [
        [
          `bulk, ${name}`,
          fmtInt(this.#kafkaBulkRate),
          fmtInt(bulk),
          (this.#kafkaBulkRate / bulk).toFixed(2),
          `${this.#json.kafka_relay_cpu_us_per_event} µs`,
          `${us(d.bulkCpuSeconds, rows).toFixed(1)} µs`,
        ],
        [
          `single-row transactions, ${name}`,
          fmtInt(this.#kafkaTxnRate),
          fmtInt(single),
          (this.#kafkaTxnRate / single).toFixed(2),
          `${this.#json.kafka_txn_relay_cpu_us_per_event} µs`,
          `${us(d.txnCpuSeconds, txn).toFixed(1)} µs`,
        ],
      ];
    };
    table(
      [
        'backlog',
        'relay events/s',
        'Debezium events/s',
        'relay ÷ Debezium',
        'relay CPU/event',
        'Debezium CPU/event',
      ],
      [...rowsOf(p), ...rowsOf(tuned)],
    );
    for (const d of [p, tuned]) {
      const prefix = d.tuned ? 'debezium_tuned' : 'debezium';
      const bulk = rows / d.bulkSeconds;
      const single = txn / d.txnSeconds;
      console.log(
        `Debezium${d.tuned ? ' tuned' : ''}: ${d.startupSeconds.toFixed(1)} s from JVM start to streaming, peak RSS ${d.peakRssMb.toFixed(0)} MB; its drain ends when the broker holds every record; vs pg_recvlogical ${((bulk / this.#recvBulkRate) * 100).toFixed(0)} %.`,
      );
      Object.assign(this.#json, {
        [`${prefix}_bulk_events_per_s`]: Math.round(bulk),
        [`${prefix}_txn_events_per_s`]: Math.round(single),
        [`${prefix}_drain_ratio`]: ratio(this.#kafkaBulkRate / bulk),
        [`${prefix}_txn_drain_ratio`]: ratio(this.#kafkaTxnRate / single),
        [`${prefix}_vs_recvlogical_bulk`]: ratio(bulk / this.#recvBulkRate),
        [`${prefix}_cpu_us_per_event`]: round(us(d.bulkCpuSeconds, rows)),
        [`${prefix}_txn_cpu_us_per_event`]: round(us(d.txnCpuSeconds, txn)),
        [`${prefix}_peak_rss_mb`]: Math.round(d.peakRssMb),
        [`${prefix}_startup_s`]: round(d.startupSeconds),
      });
      if (d.live) {
        const l = d.live.dist;
        console.log(
          `Debezium${d.tuned ? ' tuned' : ''} live (same writer, same rate): p50 ${l.p50.toFixed(1)} ms, p90 ${l.p90.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms, max ${l.max.toFixed(1)} ms, missing ${d.live.missing} (after ${d.live.warmupSeconds.toFixed(1)} s of warm-up, until its JVM's and the broker's JIT compilers were quiet; its max ${d.live.warmup.max.toFixed(1)} ms)`,
        );
        Object.assign(this.#json, {
          [`${prefix}_live_p50_ms`]: round(l.p50),
          [`${prefix}_live_p90_ms`]: round(l.p90),
          [`${prefix}_live_p99_ms`]: round(l.p99),
          [`${prefix}_live_max_ms`]: round(l.max),
          [`${prefix}_live_missing`]: d.live.missing,
          [`${prefix}_live_warmup_max_ms`]: round(d.live.warmup.max),
          [`${prefix}_live_warmup_seconds`]: round(d.live.warmupSeconds),
        });
      }
    }
    this.#json.debezium_version = p.version;
    this.#json.debezium_tuning = { ...DEBEZIUM_TUNING.worker, ...DEBEZIUM_TUNING.connector };
  }

  print(): void {
    for (const prefix of ['debezium', 'debezium_tuned']) {
      const dbzP99 = this.#json[`${prefix}_live_p99_ms`];
      if (typeof dbzP99 !== 'number' || Number.isNaN(this.#liveP99)) continue;
      this.#json[`${prefix}_p99_ratio`] = ratio(this.#liveP99 / dbzP99);
      console.log(
        `\nlive p99: relay ${this.#liveP99.toFixed(1)} ms vs Debezium${prefix === 'debezium' ? '' : ' tuned'} ${dbzP99} ms → ratio ${this.#json[`${prefix}_p99_ratio`]} (relay ÷ Debezium)`,
      );
    }
    console.log(JSON.stringify(this.#json));
  }
}
