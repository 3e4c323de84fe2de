import { readFileSync } from 'node:fs';
import type pg from 'pg';
import type { Config } from '../../config/load.ts';
import { ErrorCode, RelayError } from '../../errors.ts';
import { type Logger, silentLogger } from '../../observability/logger.ts';
import { formatLsn, parseLsn } from '../../replication/lsn.ts';
import type { KafkaClientSettings } from '../../sinks/kafka/kafka-sink.ts';
import { readSlotRow } from '../../store/slots.ts';
import { qualified } from '../../store/sql-ident.ts';
import {
  AmbiguousOffsetsError,
  type DebeziumOffsets,
  fileEntries,
  type OffsetsEntry,
  pickOffsets,
} from './offsets.ts';
import { readOffsetsTopic } from './offsets-topic.ts';

/** The relay's cutover record of the Debezium preset (sql/debezium/000002_cutover.sql). */
export function cutoverTable(schema: string, table: string): string {
  return qualified(schema, `${table}_relay_cutover`);
}

/** Where Debezium's offsets are read: a file, or the distributed worker's offsets topic. */
export type OffsetsSource =
  | { file: string; topic?: undefined }
  | { topic: string; kafka: KafkaClientSettings; file?: undefined };

/** A cutover: the relay's table and slot, and where to read which connector's offsets. */
export interface CutoverTarget {
  schema: string;
  table: string;
  slot: string;
  offsets: OffsetsSource;
  /** The connector's name (Connect's `name`, --debezium-connector): picks its offsets. */
  connector?: string;
  /** topic.prefix: picks the connector's offsets by its server. */
  server?: string;
}

/** What a cutover would record: Debezium's position from its offsets, and where the slot resends from. */
export interface CutoverPlan {
  slot: string;
  plugin: string;
  lsnProc: bigint;
  lsnCommit: bigint;
  /** The record the offsets were read from (file, or topic partition and offset) and its connector. */
  where: string;
  connector: string | null;
  /** The slot's confirmed_flush_lsn: the stream starts there. */
  start: bigint;
}

/** The option that names the offsets, for messages. */
function optionOf(o: OffsetsSource): string {
  return o.file !== undefined ? `--debezium-offsets ${o.file}` : `--debezium-offsets-topic ${o.topic}`;
}

/**
 * Debezium's position: the connector's latest offsets record, from the file or the topic.
 * Several connectors and none named: AmbiguousOffsetsError (exit 64); the topic's brokers not
 * reachable: BROKER_UNAVAILABLE (exit 69); anything else: CONFIG_INVALID (exit 78).
 */
export async function readDebeziumOffsets(t: CutoverTarget, log?: Logger): Promise<DebeziumOffsets> {
  const o = t.offsets;
  const want = {
    ...(t.connector !== undefined ? { connector: t.connector } : {}),
    ...(t.server !== undefined ? { server: t.server } : {}),
  };
  let entries: OffsetsEntry[];
  try {
    entries =
      o.file !== undefined
        ? fileEntries(readFileSync(o.file), o.file)
        : await readOffsetsTopic(o.kafka, o.topic, log ?? silentLogger());
  } catch (e) {
    const cause = (e as Error).cause as { name?: string; type?: string } | undefined;
    if (
      o.topic !== undefined &&
      cause?.name?.startsWith('KafkaJS') &&
      cause.type !== 'UNKNOWN_TOPIC_OR_PARTITION'
    )
      throw new RelayError(ErrorCode.BROKER_UNAVAILABLE, `${optionOf(o)}: ${(e as Error).message}`, {
        cause: e,
        fix: "check --kafka-brokers (the Connect cluster's bootstrap.servers), that the brokers are reachable from here, and the --kafka-ssl-* / --kafka-sasl-* options (the credentials need READ and DESCRIBE on the offsets topic); then run migrate again.",
      });
    throw new RelayError(ErrorCode.CONFIG_INVALID, `${optionOf(o)}: ${(e as Error).message}`);
  }
  const source = o.file !== undefined ? `the offsets file ${o.file}` : `the offsets topic ${o.topic}`;
  try {
    return pickOffsets(entries, want, source);
  } catch (e) {
    if (e instanceof AmbiguousOffsetsError) throw e;
    throw new RelayError(ErrorCode.CONFIG_INVALID, `${optionOf(o)}: ${(e as Error).message}`);
  }
}

/**
 * Reads and checks a cutover without changing anything (`migrate --dry-run` stops here). The slot
 * must exist and use pgoutput — a decoderbufs slot cannot be reused (a slot's plugin never
 * changes): the error says the one safe path. A pgoutput slot that is already past Debezium's
 * position (it never is, for Debezium's own slot) would be a gap.
 */
export async function planCutover(db: pg.ClientBase, t: CutoverTarget, log?: Logger): Promise<CutoverPlan> {
  const offsets = await readDebeziumOffsets(t, log);
  const slot = await readSlotRow(db, t.slot);
  if (!slot)
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `slot ${t.slot} does not exist: a cutover takes over Debezium's slot (its slot.name), which holds the WAL since Debezium's last confirmed position`,
    );
  if (slot.plugin !== 'pgoutput')
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `slot ${t.slot} uses the ${slot.plugin} plugin; a slot's plugin cannot change, and the relay reads pgoutput only`,
      {
        fix: `while Debezium still runs: create a publication of the outbox table (CREATE PUBLICATION … FOR TABLE … WITH (publish = 'insert')) and a new pgoutput slot (SELECT pg_create_logical_replication_slot('outbox_relay', 'pgoutput')); wait until Debezium has flushed offsets past the new slot's confirmed_flush_lsn (60 s by default); stop Debezium; then migrate --compat debezium --slot outbox_relay --debezium-offsets <file> (or --debezium-offsets-topic connect-offsets) (it refuses a slot that starts after Debezium's position: that would be a gap); drop Debezium's old slot (SELECT pg_drop_replication_slot('${t.slot}'))`,
      },
    );
  const start = slot.confirmed_flush_lsn ? parseLsn(slot.confirmed_flush_lsn) : 0n;
  if (start > offsets.lsnCommit && start > offsets.lsnProc)
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `slot ${t.slot} starts at ${formatLsn(start)}, after Debezium's last processed position ${formatLsn(offsets.lsnProc)}: the events between them would be lost`,
      {
        fix: 'start Debezium again until its offsets are flushed past the slot (offset.flush.interval.ms, 60 s by default), stop it, and run this again with the new offsets',
      },
    );
  return {
    slot: t.slot,
    plugin: slot.plugin,
    lsnProc: offsets.lsnProc,
    lsnCommit: offsets.lsnCommit,
    where: offsets.where,
    connector: offsets.connector,
    start,
  };
}

/** The skip rule the relay's first streams apply (resume.ts), in words. */
export function describeSkipRule(p: CutoverPlan): string {
  return `the slot resends from ${formatLsn(p.start)}; the relay skips transactions committed at or before lsn_commit ${formatLsn(p.lsnCommit)}, and the changes up to lsn_proc ${formatLsn(p.lsnProc)} in the transaction that holds it; everything after is published`;
}

/**
 * `migrate --compat debezium --debezium-offsets <file> | --debezium-offsets-topic <topic>` (after
 * the migrations): records where Debezium stopped, for the slot the relay takes over (planCutover
 * checks it first).
 */
export async function recordCutover(db: pg.ClientBase, t: CutoverTarget, log?: Logger): Promise<string> {
  const p = await planCutover(db, t, log);
  await db.query(
    `INSERT INTO ${cutoverTable(t.schema, t.table)} (slot_name, lsn_proc, lsn_commit)
     VALUES ($1, $2::pg_lsn, $3::pg_lsn)
     ON CONFLICT (slot_name) DO UPDATE SET lsn_proc = excluded.lsn_proc, lsn_commit = excluded.lsn_commit, recorded_at = now()`,
    [t.slot, formatLsn(p.lsnProc), formatLsn(p.lsnCommit)],
  );
  const what = `cutover from Debezium recorded for slot ${t.slot} (offsets of ${p.connector ?? 'the connector'} from ${p.where}): the relay skips what Debezium processed (lsn_proc ${formatLsn(p.lsnProc)}, lsn_commit ${formatLsn(p.lsnCommit)}; the slot resends from ${formatLsn(p.start)})`;
  log?.info({ slot: t.slot, lsnProc: formatLsn(p.lsnProc), lsnCommit: formatLsn(p.lsnCommit) }, what);
  return what;
}

/** The slot's cutover record, or null (no cutover, or not the preset). */
export async function readCutover(
  db: pg.Pool | pg.ClientBase,
  schema: string,
  table: string,
  slot: string,
): Promise<{ lsnProc: bigint; lsnCommit: bigint } | null> {
  const r = await db
    .query<{ lsn_proc: string; lsn_commit: string }>(
      `SELECT lsn_proc::text, lsn_commit::text FROM ${cutoverTable(schema, table)} WHERE slot_name = $1`,
      [slot],
    )
    .catch(() => null);
  const row = r?.rows[0];
  return row ? { lsnProc: parseLsn(row.lsn_proc), lsnCommit: parseLsn(row.lsn_commit) } : null;
}

/**
 * `migrate --dry-run`'s lines for the cutover: Debezium's position and the skip rule it would
 * record. A cutover migrate would refuse is refused here with the same error.
 */
export async function describeCutoverPlan(
  db: pg.ClientBase,
  t: CutoverTarget,
  log?: Logger,
): Promise<string[]> {
  const p = await planCutover(db, t, log);
  return [
    `Debezium's offsets (${p.connector ? `connector ${p.connector}, ` : ''}${p.where}): lsn_proc ${formatLsn(p.lsnProc)}, lsn_commit ${formatLsn(p.lsnCommit)}`,
    `would record the cutover in ${cutoverTable(t.schema, t.table)}: ${describeSkipRule(p)}`,
  ];
}

/**
 * The cutover of `migrate` from its configuration, or undefined when it has none: the offsets
 * file or topic, the connector's name, its topic.prefix, and the Kafka options for the topic.
 */
export function cutoverTarget(c: Config): CutoverTarget | undefined {
  if (c.compat !== 'debezium') return undefined;
  let offsets: OffsetsSource;
  if (c.debeziumOffsets !== undefined) offsets = { file: c.debeziumOffsets };
  else if (c.debeziumOffsetsTopic !== undefined)
    offsets = { topic: c.debeziumOffsetsTopic, kafka: { ...c, kafkaRequestTimeoutMs: 30_000 } };
  else return undefined;
  const server = c.debezium['topic.prefix'] ?? c.debezium['debezium.source.topic.prefix'];
  return {
    schema: c.schema,
    table: c.table,
    slot: c.slot,
    offsets,
    ...(c.debeziumConnector !== undefined ? { connector: c.debeziumConnector } : {}),
    ...(server ? { server } : {}),
  };
}
