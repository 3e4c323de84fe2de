/**
 * Where a Debezium PostgreSQL connector stopped, from its Kafka Connect offsets: the standalone
 * worker's offsets file (a Java-serialised map whose keys and values are the JSON bytes Connect
 * stores), or the value of its record in the distributed worker's offsets topic saved as a file
 * (`{"lsn_proc":…,"lsn_commit":…,"lsn":…,"txId":…,"ts_usec":…}`). Pure.
 *
 * lsn_proc is the WAL position of the last change Debezium processed, lsn_commit the commit
 * position of the last transaction it processed (io.debezium.connector.postgresql.connection.
 * WalPositionLocator resumes after them).
 */
export interface DebeziumOffsets {
  lsnProc: bigint;
  lsnCommit: bigint;
  /** The source partition the offsets belong to, when the file names it (e.g. {"server":"app"}). */
  server: string | null;
}

/** The offsets in `bytes`; throws naming what is missing. With several connectors, `server` picks one. */
export function parseDebeziumOffsets(bytes: Buffer, server?: string): DebeziumOffsets {
  // The JSON bytes sit as they are inside the Java serialisation: find each object.
  const text = bytes.toString('latin1');
  const found: DebeziumOffsets[] = [];
  let lastServer: string | null = null;
  for (const m of text.matchAll(/\[?"[^"\\]*",\{"server":"([^"\\]*)"\}\]|\{[^{}]*"lsn_proc"[^{}]*\}/g)) {
    if (m[1] !== undefined) {
      lastServer = m[1];
      continue;
    }
    let value: Record<string, unknown>;
    try {
      value = JSON.parse(Buffer.from(m[0], 'latin1').toString('utf8')) as Record<string, unknown>;
    } catch {
      continue;
    }
    const proc = value.lsn_proc;
    const commit = value.lsn_commit;
    if (typeof proc !== 'number' && typeof proc !== 'string') continue;
    found.push({
      lsnProc: BigInt(proc as number),
      lsnCommit: BigInt((commit ?? proc) as number),
      server: lastServer,
    });
  }
  const pick = server === undefined ? found : found.filter((f) => f.server === server);
  if (pick.length === 0)
    throw new Error(
      `no Debezium PostgreSQL offsets (lsn_proc, lsn_commit)${server ? ` for server ${server}` : ''} in the offsets file`,
    );
  if (pick.length > 1 && new Set(pick.map((p) => p.server)).size > 1)
    throw new Error(
      `offsets of several connectors (${pick.map((p) => p.server).join(', ')}): name one with --debezium topic.prefix=<server>`,
    );
  return pick.at(-1)!;
}
