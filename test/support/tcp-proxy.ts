/**
 * A TCP fault proxy between a client and one real broker, for faults a healthy broker never
 * makes by itself:
 *
 *   const proxy = await TcpProxy.start({ port: broker.clientPort });   // listens on proxy.port (bound on port 0)
 *   const early = await TcpProxy.start();   // no target yet: a broker can advertise early.port …
 *   early.forwardTo({ port: broker.clientPort });                     // … and be reached once it runs
 *   proxy.setLatency(40);                 // every chunk, both ways, 40 ms later (order kept)
 *   proxy.cut();                          // drop every connection and refuse new ones …
 *   proxy.restore();                      // … until restored
 *   await proxy.loseNextProduceAck();     // the next Produce request reaches the broker (which
 *                                         // stores it), its response never reaches the client, and
 *                                         // the connection is cut once the broker answered
 *
 * It understands just enough of the Kafka framing (int32 size, then the request header's api key
 * and correlation id; the response header's correlation id) to recognise a Produce exchange.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

const PRODUCE = 0;

interface Pair {
  client: Socket;
  server: Socket;
  /** Correlation ids of Produce requests whose responses are to be swallowed. */
  swallow: Set<number>;
}

/** Splits a stream into Kafka frames (size-prefixed), calling `onFrame` with each whole frame. */
function framer(onFrame: (frame: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const size = pending.readInt32BE(0);
      if (pending.length < 4 + size) break;
      onFrame(pending.subarray(0, 4 + size));
      pending = pending.subarray(4 + size);
    }
  };
}

export class TcpProxy {
  readonly port: number;
  readonly #server: Server;
  #target: { host: string; port: number } | null;
  readonly #pairs = new Set<Pair>();
  #latencyMs = 0;
  #cut = false;
  #armLostAck: (() => void) | null = null;
  /** Produce requests seen, for tests that want to know traffic passed. */
  produceRequests = 0;

  private constructor(server: Server, port: number, target: { host: string; port: number } | null) {
    this.#server = server;
    this.port = port;
    this.#target = target;
  }

  /**
   * Listens on a port the kernel picks (read back as `port`: nothing to reserve, no race). Without
   * a target, connections are refused until forwardTo().
   */
  static start(target?: { host?: string; port: number }): Promise<TcpProxy> {
    return new Promise((resolve, reject) => {
      const server = createServer();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const port = (server.address() as { port: number }).port;
        const proxy = new TcpProxy(server, port, null);
        if (target) proxy.forwardTo(target);
        server.on('connection', (c) => proxy.#accept(c));
        resolve(proxy);
      });
    });
  }

  /** Where new connections go from now on. */
  forwardTo(target: { host?: string; port: number }): void {
    this.#target = { host: target.host ?? '127.0.0.1', port: target.port };
  }

  setLatency(ms: number): void {
    this.#latencyMs = ms;
  }

  /** Destroys every connection and refuses new ones until restore(). */
  cut(): void {
    this.#cut = true;
    for (const p of this.#pairs) this.#drop(p);
  }

  restore(): void {
    this.#cut = false;
  }

  get isCut(): boolean {
    return this.#cut;
  }

  /**
   * Arms the lost-acknowledgement fault; resolves once it happened: a Produce request went through,
   * the broker answered, the answer was dropped and the connection cut.
   */
  loseNextProduceAck(): Promise<void> {
    return new Promise((resolve) => {
      this.#armLostAck = resolve;
    });
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  #accept(client: Socket): void {
    if (this.#cut || this.#target === null) {
      client.destroy();
      return;
    }
    const server = createConnection(this.#target);
    const pair: Pair = { client, server, swallow: new Set() };
    this.#pairs.add(pair);
    let lostAckDone: (() => void) | null = null;
    // Per direction, frames leave in the order they came even when the latency changes.
    const due = new Map<Socket, number>();
    const forward = (to: Socket, data: Buffer) => {
      const at = Math.max(Date.now() + this.#latencyMs, due.get(to) ?? 0);
      due.set(to, at);
      if (at <= Date.now()) {
        if (to.writable) to.write(data);
      } else {
        setTimeout(() => to.writable && to.write(data), at - Date.now());
      }
    };
    client.on(
      'data',
      framer((frame) => {
        if (frame.length >= 12 && frame.readInt16BE(4) === PRODUCE) {
          this.produceRequests++;
          if (this.#armLostAck) {
            pair.swallow.add(frame.readInt32BE(8));
            lostAckDone = this.#armLostAck;
            this.#armLostAck = null;
          }
        }
        forward(server, frame);
      }),
    );
    server.on(
      'data',
      framer((frame) => {
        if (frame.length >= 8 && pair.swallow.has(frame.readInt32BE(4))) {
          // The broker stored the batch and acknowledged it; the client never hears of it.
          this.#drop(pair);
          lostAckDone?.();
          lostAckDone = null;
          return;
        }
        forward(client, frame);
      }),
    );
    const close = () => this.#drop(pair);
    client.on('error', close);
    server.on('error', close);
    client.on('close', close);
    server.on('close', close);
  }

  #drop(p: Pair): void {
    if (!this.#pairs.delete(p)) return;
    p.client.destroy();
    p.server.destroy();
  }
}
