import pg from 'pg';
import { ident } from '../store/sql-ident.ts';
import { timelineKey } from '../store/timeline.ts';
import { BINARY_READABLE_TYPES } from './binary-values.ts';
import { CopyReader } from './copy-reader.ts';
import { READ_COLUMNS } from './decoder.ts';
import { type Lsn, readLsn } from './lsn.ts';

/** Copy-both sub-message tags (protocol-replication.html). */
const XLOG_DATA = 0x77; // 'w': WAL start (8), WAL end (8), send time (8), then the plugin's message
/** Bytes of XLogData before the plugin's message. */
const XLOG_HEADER = 25;
const KEEPALIVE = 0x6b; // 'k'
const STANDBY_STATUS = 0x72; // 'r'

/** Longest wait for the server to close the connection at close(). */
const CLOSE_TIMEOUT_MS = 2000;

/** Microseconds between the Unix epoch and PostgreSQL's (2000-01-01). */
const PG_EPOCH_US = 946_684_800_000_000n;

export interface StreamHandlers {
  /**
   * One pgoutput message, in data[start, end), after its XLogData header (walStartOf reads the
   * header's WAL position). `data` stays valid for as long as anyone holds it when the stream is
   * read by a CopyReader (onStart's `stableBuffers`); otherwise only during the call (pg's parser
   * reuses its buffer).
   */
  onData(data: Buffer, start: number, end: number): void;
  /**
   * Right before START_REPLICATION goes out: how the stream will be read, and the server's
   * timeline key from IDENTIFY_SYSTEM (store/timeline.ts): every event of this stream belongs to it.
   */
  onStart?(info: {
    binary: boolean;
    stableBuffers: boolean;
    unconverted: boolean;
    /** server_version, e.g. "18.4" (null if it could not be read). */
    serverVersion: string | null;
    /** The pgoutput options START_REPLICATION sends (publication_names, proto_version, binary…). */
    options: [string, string][];
    timeline: string;
  }): void;
  /**
   * The server answered START_REPLICATION (CopyBothResponse): the slot is this connection's now
   * (PostgreSQL acquires it, active_pid set, before it answers).
   */
  onStreaming?(): void;
  /** A primary keepalive: everything before walEnd that we are to receive has been sent. */
  onKeepalive(walEnd: Lsn, replyRequested: boolean): void;
}

/** The WAL start of the XLogData whose message StreamHandlers.onData got at `start`. */
export function walStartOf(data: Buffer, start: number): Lsn {
  return readLsn(data, start - XLOG_HEADER + 1);
}

/** pgoutput's `binary` option (values in their types' binary send formats) exists from PostgreSQL 14 on. */
export const PGOUTPUT_BINARY_SINCE = 140_000;

/**
 * pgoutput's protocol version, the same on every server (14 – 18 tested): 1 sends each
 * transaction once it committed, which is all the relay reads. 2 (14+) adds `streaming` of
 * transactions still in progress, 3 (15+) two-phase commit, 4 (16+) parallel streaming: each
 * would send changes the relay must hold until their commit or abort, for no gain in what it
 * publishes; the relay asks for none of them.
 */
export const PGOUTPUT_PROTO_VERSION = '1';

/**
 * pgoutput's options, as name/value pairs (START_REPLICATION's and pg_recvlogical's -o alike).
 * Binary values cost the walsender and the relay less per row than their text (a 500-byte bytea
 * is 500 bytes, not 1,000 hex characters; a timestamptz is 8 bytes, not a string to parse).
 */
export function pgoutputOptions(o: {
  publication: string;
  messages?: boolean;
  binary: boolean;
}): [string, string][] {
  const options: [string, string][] = [
    ['proto_version', PGOUTPUT_PROTO_VERSION],
    ['publication_names', o.publication],
  ];
  if (o.messages) options.push(['messages', 'true']);
  if (o.binary) options.push(['binary', 'true']);
  return options;
}

/**
 * Binary values only from PostgreSQL 14 on, and only while every outbox column the relay reads
 * has a type whose binary format the decoder reads (binary-values.ts): a hand-made table with,
 * say, an aggregate_id of another type keeps text values, which pg's parsers read whatever the
 * type. Runs on the replication connection too (plain SQL, simple protocol: no parameters). If
 * the query fails, text: a connection that is gone fails START_REPLICATION with its own error.
 */
export async function binaryPossible(client: pg.ClientBase, publication: string): Promise<boolean> {
  return (await streamChoices(client, publication)).binary;
}

/** binaryPossible's answer, and the server's version (server_version, e.g. "18.4"; null if unread). */
export async function streamChoices(
  client: pg.ClientBase,
  publication: string,
): Promise<{ binary: boolean; serverVersion: string | null }> {
  const columns = READ_COLUMNS.map((c) => pg.escapeLiteral(c)).join(', ');
  const result = await client
    .query<{ version: number; server: string; types: number[] }>(
      `SELECT current_setting('server_version_num')::int AS version, current_setting('server_version') AS server,
         ARRAY(SELECT DISTINCT a.atttypid::int
           FROM pg_publication_tables t
           JOIN pg_namespace n ON n.nspname = t.schemaname
           JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename
           JOIN pg_attribute a ON a.attrelid = c.oid
          WHERE t.pubname = ${pg.escapeLiteral(publication)} AND a.attnum > 0 AND NOT a.attisdropped
            AND a.attname IN (${columns})) AS types`,
    )
    .catch(() => null);
  const r = result?.rows[0];
  return {
    binary:
      r !== undefined &&
      r.version >= PGOUTPUT_BINARY_SINCE &&
      r.types.every((t) => BINARY_READABLE_TYPES.has(t)),
    serverVersion: r?.server ?? null,
  };
}

/**
 * In a SQL_ASCII database, streams its bytes as they are stored. A text column there holds any
 * bytes, and the walsender converts every value it sends to the client encoding (pg's startup
 * sets UTF8): one value that is not UTF-8 fails the stream itself (22021, `invalid byte sequence
 * for encoding "UTF8"`) at every start, a poison position that stops every later event. With the
 * database's own encoding as the client encoding nothing is converted, so the row reaches the
 * relay, which checks its text values (decoder.ts checkUtf8) and makes a bad one its event's
 * permanent failure. Other encodings convert to UTF8 without loss: nothing to do. true = the
 * stream is unconverted.
 */
export async function streamUnconverted(client: pg.ClientBase): Promise<boolean> {
  const r = await client.query<{ server_encoding: string }>('SHOW server_encoding').catch(() => null);
  if (r?.rows[0]?.server_encoding !== 'SQL_ASCII') return false;
  await client.query(`SET client_encoding = 'SQL_ASCII'`);
  return true;
}

/**
 * IDENTIFY_SYSTEM on the replication connection: the timeline key of the server this stream comes
 * from. A logical walsender streams the server's current timeline (a standby's decoding aside).
 */
export async function identifySystem(client: pg.ClientBase): Promise<string> {
  const r = await client.query<{ systemid: string; timeline: number | string }>('IDENTIFY_SYSTEM');
  const row = r.rows[0]!;
  return timelineKey(String(row.systemid), Number(row.timeline));
}

/** server_version by SHOW (a replication command: no catalog read); null if it fails. */
async function serverVersion(client: pg.ClientBase): Promise<string | null> {
  const r = await client.query<{ server_version: string }>('SHOW server_version').catch(() => null);
  return r?.rows[0]?.server_version ?? null;
}

export interface StartOptions {
  slot: string;
  publication: string;
  /** Also receive logical decoding messages (pg_logical_emit_message), for heartbeats. */
  messages?: boolean;
  /** Text values whatever the types (the Debezium preset reads PostgreSQL's text, as Debezium does). */
  text?: boolean;
}

/**
 * A replication connection driving START_REPLICATION's copy-both stream itself.
 *
 * Why not LogicalReplicationService (design.md §3 pitfalls): its timer acknowledges
 * the last LSN it has *seen*, and re-subscribing resumes from that LSN. Here nothing is
 * acknowledged unless the caller asks, and a stream always starts at 0/0 so the server
 * resumes from the slot's confirmed_flush_lsn.
 */
export class ReplicationConnection {
  readonly #client: pg.Client;
  #lastStatusAt = 0;
  #closed = false;
  #binary = false;
  /** START_REPLICATION is sent: status updates may go out (before it, the server would refuse a CopyData). */
  #started = false;
  /** A status update asked for before START_REPLICATION was sent: sent right after it. */
  #deferredStatus: [Lsn, Lsn, boolean] | null = null;

  private constructor(client: pg.Client) {
    this.#client = client;
  }

  static async open(connectionString: string): Promise<ReplicationConnection> {
    const client = new pg.Client({
      connectionString,
      // @ts-expect-error: `replication` is supported by pg but missing from @types/pg.
      replication: 'database',
      keepAlive: true,
      application_name: 'pg-outbox-relay',
    });
    const conn = new ReplicationConnection(client);
    // Errors also reject the running query; this listener only keeps an 'error' event from crashing the process.
    client.on('error', () => {});
    await client.connect();
    return conn;
  }

  // biome-ignore lint/suspicious/noExplicitAny: pg's Connection is untyped.
  get #connection(): any {
    // biome-ignore lint/suspicious/noExplicitAny: pg's Connection is untyped.
    return (this.#client as any).connection;
  }

  /** Whether the stream asked for binary values (decided by stream()). */
  get binary(): boolean {
    return this.#binary;
  }

  /** Streams until the server ends the copy or the connection fails; rejects with the server's error. */
  async stream(opts: StartOptions, handlers: StreamHandlers): Promise<void> {
    const timeline = await identifySystem(this.#client);
    // Text values asked for (the Debezium preset): no SQL on this connection before the stream —
    // a catalog query here (pg_publication_tables) made pgoutput miss the rows of a transaction
    // across a publication's re-creation (test/integration/debezium-narrow-publication.test.ts).
    // SHOW reads no catalog.
    const choices = opts.text
      ? { binary: false, serverVersion: await serverVersion(this.#client) }
      : await streamChoices(this.#client, opts.publication);
    this.#binary = !opts.text && choices.binary;
    const unconverted = await streamUnconverted(this.#client);
    const connection = this.#connection;
    const onCopyData = (chunk: Buffer, start: number, end: number) => {
      const tag = chunk[start];
      if (tag === XLOG_DATA) {
        handlers.onData(chunk, start + XLOG_HEADER, end);
      } else if (tag === KEEPALIVE) {
        handlers.onKeepalive(readLsn(chunk, start + 1), chunk[start + 17] === 1);
      }
    };
    // The connection is idle (its last query ended): from here on the socket's bytes go through a
    // CopyReader, which hands everything but CopyData to pg's own listener. Any other shape of
    // pg than the one listener pg-protocol installs: pg's 'copyData' events, as before.
    const socket = connection.stream as NodeJS.EventEmitter | undefined;
    const pgListeners = socket?.listeners('data') ?? [];
    let stableBuffers = false;
    if (socket && pgListeners.length === 1) {
      const pgData = pgListeners[0] as (bytes: Buffer) => void;
      const reader = new CopyReader(onCopyData, (bytes) => pgData.call(socket, bytes));
      socket.removeListener('data', pgData);
      socket.on('data', (chunk: Buffer) => {
        try {
          reader.push(chunk);
        } catch (e) {
          // Not the server's protocol: end the connection with the error (the stream's promise rejects).
          (socket as unknown as { destroy(e: unknown): void }).destroy(e);
        }
      });
      stableBuffers = reader.stable;
    } else connection.on('copyData', ({ chunk }: { chunk: Buffer }) => onCopyData(chunk, 0, chunk.length));
    const chosen = pgoutputOptions({ ...opts, binary: this.#binary });
    handlers.onStart?.({
      binary: this.#binary,
      stableBuffers,
      unconverted,
      serverVersion: choices.serverVersion,
      options: chosen,
      timeline,
    });
    // pg's Connection names the CopyBothResponse 'replicationStart'.
    if (handlers.onStreaming) connection.once('replicationStart', () => handlers.onStreaming?.());
    const options = chosen.map(([name, value]) => `${name} ${pg.escapeLiteral(value)}`).join(', ');
    // 0/0: the server starts from the slot's confirmed_flush_lsn (never from a position we only saw).
    const started = this.#client.query(`START_REPLICATION SLOT ${ident(opts.slot)} LOGICAL 0/0 (${options})`);
    // The client was idle: START_REPLICATION is on the wire, status updates may follow it.
    this.#started = true;
    const deferred = this.#deferredStatus;
    this.#deferredStatus = null;
    if (deferred) this.sendStatus(...deferred);
    await started;
  }

  /**
   * Standby status update. `flushed` becomes the slot's confirmed_flush_lsn: pass only
   * positions the AckTracker says are settled.
   */
  sendStatus(received: Lsn, flushed: Lsn, replyRequested = false): void {
    if (this.#closed) return;
    if (!this.#started) {
      this.#deferredStatus = [received, flushed, replyRequested];
      return;
    }
    const msg = Buffer.allocUnsafe(34);
    msg[0] = STANDBY_STATUS;
    msg.writeBigUInt64BE(received > flushed ? received : flushed, 1);
    msg.writeBigUInt64BE(flushed, 9);
    msg.writeBigUInt64BE(flushed, 17);
    msg.writeBigUInt64BE(BigInt(Date.now()) * 1000n - PG_EPOCH_US, 25);
    msg[33] = replyRequested ? 1 : 0;
    this.#connection.sendCopyFromChunk(msg);
    this.#lastStatusAt = Date.now();
  }

  get lastStatusAt(): number {
    return this.#lastStatusAt;
  }

  /** Stops reading the socket (backpressure). Status updates can still be written. */
  pause(): void {
    this.#connection.stream?.pause();
  }

  resume(): void {
    this.#connection.stream?.resume();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.resume();
    // end() waits for the server to close the connection; a dead server must not hang shutdown,
    // so it is bounded — by a timer that is cleared as soon as end() resolves (a timer left
    // running kept every graceful stop alive for the full bound).
    const conn = this.#connection;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.#client.end().catch(() => {}),
      new Promise((r) => {
        timer = setTimeout(r, CLOSE_TIMEOUT_MS);
      }),
    ]);
    clearTimeout(timer);
    conn.stream?.destroy?.();
  }
}
