// Sockets, framing and dispatch. Like a real broker, each connection is served strictly one request at
// a time, in arrival order (Kafka mutes a channel until its response is sent): that is what makes
// pipelined produce requests land in order, and what kafkajs's separate fetch connection relies on.
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { API_VERSIONS_KEY, unsupportedApiVersionsBody } from './apis/api-versions.ts';
import { API_BY_KEY, API_SPECS } from './apis/registry.ts';
import type { ApiName, RequestHeader } from './apis/types.ts';
import { ProtocolError, Reader, type Writer } from './codec.ts';
import type { BrokerState } from './state.ts';

/** socket.request.max.bytes default: larger frames get the connection closed, as on a broker. */
const MAX_FRAME_BYTES = 100 * 1024 * 1024;
/** Stop reading from a client that pipelines more than this many unanswered requests. */
const MAX_QUEUED_REQUESTS = 8;

export type Fault =
  /** Hold this response back for `ms` (on top of setLatency). */
  | { type: 'delay'; ms: number }
  /**
   * Close the connection without answering: 'before' the request is processed (nothing stored) or
   * 'after' (stored, but the client never hears so: the retry must be deduplicated).
   */
  | { type: 'disconnect'; when: 'before' | 'after' };

interface Connection {
  readonly socket: net.Socket;
  readonly closed: AbortController;
  readonly queue: Buffer[];
  busy: boolean;
}

export class StandInServer {
  private readonly state: BrokerState;
  private server: net.Server | null = null;
  private readonly connections = new Set<Connection>();
  private readonly faults = new Map<ApiName, { fault: Fault; remaining: number }[]>();
  /** Unexpected exceptions in handlers: bugs in the stand-in, surfaced through stats. */
  internalErrors = 0;

  constructor(state: BrokerState) {
    this.state = state;
  }

  get listening(): boolean {
    return this.server !== null;
  }

  async listen(port: number): Promise<number> {
    if (this.server) throw new Error('already listening');
    const server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port, host: this.state.options.host }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    return (server.address() as net.AddressInfo).port;
  }

  /** Stops listening and drops every connection mid-flight, like a crashed broker process. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const c of this.connections) c.socket.destroy();
    await closed;
  }

  addFault(api: ApiName, fault: Fault, times: number): void {
    const list = this.faults.get(api) ?? [];
    list.push({ fault, remaining: times });
    this.faults.set(api, list);
  }

  clearFaults(): void {
    this.faults.clear();
  }

  private takeFault(api: ApiName): Fault | undefined {
    const list = this.faults.get(api);
    const next = list?.[0];
    if (!list || !next) return undefined;
    if (--next.remaining <= 0) list.shift();
    return next.fault;
  }

  private accept(socket: net.Socket): void {
    const { stats } = this.state;
    stats.connectionsAccepted++;
    stats.openConnections++;
    socket.setNoDelay(true);
    const conn: Connection = { socket, closed: new AbortController(), queue: [], busy: false };
    this.connections.add(conn);
    let pending: Buffer[] = [];
    let pendingBytes = 0;

    socket.on('data', (chunk: Buffer) => {
      pending.push(chunk);
      pendingBytes += chunk.length;
      while (pendingBytes >= 4) {
        if (pending[0]!.length < 4) pending = [Buffer.concat(pending, pendingBytes)];
        const size = pending[0]!.readInt32BE(0);
        if (size < 0 || size > MAX_FRAME_BYTES) {
          this.protocolError(conn, new ProtocolError(`request frame of ${size} bytes`));
          return;
        }
        if (pendingBytes < 4 + size) break;
        const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
        conn.queue.push(all.subarray(4, 4 + size));
        const rest = all.subarray(4 + size);
        pending = rest.length > 0 ? [rest] : [];
        pendingBytes = rest.length;
      }
      if (conn.queue.length >= MAX_QUEUED_REQUESTS) socket.pause();
      if (!conn.busy) void this.serve(conn);
    });
    // Resets from clients that go away are routine; 'close' does the bookkeeping.
    socket.on('error', () => {});
    socket.on('close', () => {
      conn.closed.abort();
      this.connections.delete(conn);
      stats.openConnections--;
    });
  }

  private async serve(conn: Connection): Promise<void> {
    conn.busy = true;
    try {
      while (conn.queue.length > 0 && !conn.socket.destroyed) {
        const frame = conn.queue.shift()!;
        if (conn.socket.isPaused() && conn.queue.length < MAX_QUEUED_REQUESTS / 2) conn.socket.resume();
        await this.process(conn, frame);
      }
    } finally {
      conn.busy = false;
    }
    if (conn.socket.isPaused() && !conn.socket.destroyed) conn.socket.resume();
  }

  private async process(conn: Connection, frame: Buffer): Promise<void> {
    const { state } = this;
    const r = new Reader(frame);
    let header: RequestHeader;
    try {
      header = {
        apiKey: r.int16(),
        apiVersion: r.int16(),
        correlationId: r.int32(),
        clientId: r.nullableString(),
      };
    } catch (e) {
      this.protocolError(conn, e);
      return;
    }
    const spec = API_BY_KEY.get(header.apiKey);
    const name = spec?.name ?? `api-${header.apiKey}`;
    state.stats.requests[name] = (state.stats.requests[name] ?? 0) + 1;
    if (!spec || header.apiVersion < spec.minVersion || header.apiVersion > spec.maxVersion) {
      if (header.apiKey === API_VERSIONS_KEY) {
        await this.respond(conn, header, unsupportedApiVersionsBody(API_SPECS), 0);
        return;
      }
      // Brokers close the connection on API versions they never advertised.
      this.protocolError(conn, new ProtocolError(`unsupported ${name} v${header.apiVersion}`));
      return;
    }
    const fault = this.takeFault(spec.name);
    if (fault?.type === 'disconnect' && fault.when === 'before') {
      conn.socket.destroy();
      return;
    }
    let body: Writer | null;
    let close = false;
    try {
      const ctx = {
        state,
        header,
        connectionClosed: conn.closed.signal,
        closeConnection: () => {
          close = true;
        },
      };
      body = await spec.handle(ctx, r);
    } catch (e) {
      this.protocolError(conn, e);
      return;
    }
    if (close || fault?.type === 'disconnect') {
      conn.socket.destroy();
      return;
    }
    if (body === null) return;
    await this.respond(conn, header, body, state.latencyMs + (fault?.type === 'delay' ? fault.ms : 0));
  }

  private async respond(
    conn: Connection,
    header: RequestHeader,
    body: Writer,
    delayMs: number,
  ): Promise<void> {
    const { socket } = conn;
    if (delayMs > 0) {
      try {
        await sleep(delayMs, undefined, { signal: conn.closed.signal });
      } catch {
        return; // the connection went away while the response was held back
      }
    }
    if (socket.destroyed) return;
    const chunks = body.toBuffers();
    // Response header v0 (non-flexible versions): size, then correlation id.
    const head = Buffer.allocUnsafe(8);
    head.writeInt32BE(4 + body.length, 0);
    head.writeInt32BE(header.correlationId, 4);
    socket.cork();
    socket.write(head);
    let flushed = true;
    for (const c of chunks) flushed = socket.write(c);
    socket.uncork();
    if (!flushed) await waitForDrain(socket);
  }

  private protocolError(conn: Connection, e: unknown): void {
    if (e instanceof ProtocolError || (e instanceof RangeError && 'code' in e)) {
      this.state.stats.protocolErrors++;
      this.state.options.log(`closing connection: ${e.message}`);
    } else {
      this.internalErrors++;
      console.error('kafka stand-in: internal error while serving a request', e);
    }
    conn.socket.destroy();
  }
}

function waitForDrain(socket: net.Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('drain', done);
    socket.on('close', done);
  });
}
