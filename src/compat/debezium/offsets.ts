/**
 * Where a Debezium PostgreSQL connector stopped, from its Kafka Connect offsets. Connect stores
 * one record per source partition: the key `["<connector name>",{"server":"<topic.prefix>"}]` and
 * the value `{"lsn_proc":…,"lsn_commit":…,"lsn":…,"txId":…,"ts_usec":…}`, both written by its
 * internal JsonConverter (schemas off). Three places hold them, read into the same entries:
 *  - the standalone worker's offsets file (a Java-serialised map whose keys and values are those
 *    JSON bytes): fileEntries;
 *  - the distributed worker's offsets topic (`connect-offsets`; the latest record of a key wins,
 *    a null value — a tombstone — means the offsets were reset): offsets-topic.ts;
 *  - one record's value saved as a file (no key): fileEntries too.
 * pickOffsets then chooses the connector. Pure.
 *
 * lsn_proc is the WAL position of the last change Debezium processed, lsn_commit the commit
 * position of the last transaction it processed (io.debezium.connector.postgresql.connection.
 * WalPositionLocator resumes after them).
 */
import { UsageError } from '../../config/usage-error.ts';

export interface DebeziumOffsets {
  lsnProc: bigint;
  lsnCommit: bigint;
  /** The source partition's server (topic.prefix), when the record's key names it. */
  server: string | null;
  /** The connector's name (Connect's `name`), when the record's key names it. */
  connector: string | null;
  /** Where the record was read (the file, or the topic's partition and offset). */
  where: string;
}

/** One stored record: its key's parts (null: a value without its key) and its value (null: reset). */
export interface OffsetsEntry {
  connector: string | null;
  server: string | null;
  value: string | null;
  where: string;
}

/** Several connectors' offsets and nothing to choose one: the command line must name it (exit 64). */
export class AmbiguousOffsetsError extends UsageError {
  constructor(message: string) {
    super(message, 'migrate');
  }
}

const KEY = /\["((?:[^"\\]|\\.)*)",\{"server":"((?:[^"\\]|\\.)*)"\}\]/;

/** A Connect offsets key of a Debezium connector (`["name",{"server":"prefix"}]`), or null. */
export function parseOffsetsKey(text: string): { connector: string; server: string } | null {
  const m = new RegExp(`^${KEY.source}$`).exec(text);
  if (!m) return null;
  try {
    const [connector, partition] = JSON.parse(m[0]) as [string, { server: string }];
    return { connector, server: partition.server };
  } catch {
    return null;
  }
}

/**
 * The LSNs of a Debezium PostgreSQL offsets value, or null when it is not one. Read as digits, not
 * through JSON.parse: an LSN is 64-bit, a JavaScript number exact only to 2^53.
 */
export function parseOffsetsValue(json: string): { lsnProc: bigint; lsnCommit: bigint } | null {
  const proc = /"lsn_proc"\s*:\s*(\d+)/.exec(json)?.[1];
  if (proc === undefined) return null;
  const commit = /"lsn_commit"\s*:\s*(\d+)/.exec(json)?.[1];
  return { lsnProc: BigInt(proc), lsnCommit: BigInt(commit ?? proc) };
}

/**
 * The records of an offsets file: the standalone worker's (keys and values as JSON bytes inside
 * the Java serialisation, each value after its key) or one value saved alone.
 */
export function fileEntries(bytes: Buffer, file: string): OffsetsEntry[] {
  const text = bytes.toString('latin1');
  const out: OffsetsEntry[] = [];
  let key: { connector: string; server: string } | null = null;
  const pattern = new RegExp(`${KEY.source}|\\{[^{}]*"lsn_proc"[^{}]*\\}`, 'g');
  for (const m of text.matchAll(pattern)) {
    const utf8 = Buffer.from(m[0], 'latin1').toString('utf8');
    if (m[1] !== undefined) {
      key = parseOffsetsKey(utf8);
      continue;
    }
    out.push({ connector: key?.connector ?? null, server: key?.server ?? null, value: utf8, where: file });
    key = null;
  }
  return out;
}

function describeKey(e: { connector: string | null; server: string | null }): string {
  return `${e.connector ?? '(no connector name)'} (topic.prefix ${e.server ?? '?'})`;
}

/**
 * The offsets of one Debezium PostgreSQL connector among `entries`: the one `want` names (by its
 * connector name and/or topic.prefix; a value without its key matches any), or the only one.
 * Throws AmbiguousOffsetsError when several remain, an Error naming what was found otherwise.
 */
export function pickOffsets(
  entries: readonly OffsetsEntry[],
  want: { connector?: string; server?: string },
  source: string,
): DebeziumOffsets {
  const named = entries.filter(
    (e) =>
      (want.connector === undefined || e.connector === null || e.connector === want.connector) &&
      (want.server === undefined || e.server === null || e.server === want.server),
  );
  // A tombstone counts: it is a PostgreSQL connector's offsets, reset.
  const postgres = named.filter((e) => e.value === null || parseOffsetsValue(e.value) !== null);
  const wanted = [
    want.connector !== undefined && `connector ${want.connector}`,
    want.server !== undefined && `topic.prefix ${want.server}`,
  ].filter(Boolean);
  if (postgres.length === 0) {
    const found = entries.filter((e) => e.connector !== null).map(describeKey);
    throw new Error(
      `no Debezium PostgreSQL offsets (lsn_proc, lsn_commit)${wanted.length ? ` of ${wanted.join(', ')}` : ''} in ${source}${found.length ? `; it holds offsets of ${[...new Set(found)].join(', ')}` : ''}`,
    );
  }
  const keys = [...new Set(postgres.map(describeKey))];
  if (keys.length > 1)
    throw new AmbiguousOffsetsError(
      `${source} holds the offsets of several Debezium PostgreSQL connectors: ${keys.join(', ')}. Name one with --debezium-connector <name> (or --debezium topic.prefix=<prefix>)`,
    );
  const e = postgres.at(-1)!;
  const lsns = e.value === null ? null : parseOffsetsValue(e.value);
  if (!lsns)
    throw new Error(
      `the offsets of ${describeKey(e)} were reset (a tombstone at ${e.where}): Debezium would start over from a new snapshot, and where it stopped is not stored any more. Cut over from a connector whose offsets are in place (docs/migrating-from-debezium.md#cutover)`,
    );
  return { ...lsns, server: e.server, connector: e.connector, where: e.where };
}
