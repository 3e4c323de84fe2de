/**
 * A TCP address that follows the PostgreSQL primary, as an HA endpoint does (a virtual IP, a DNS
 * name, a pooler): the relay and the application connect to it, and a failover moves it.
 *
 *   const proxy = await PgProxy.start(primary.port);
 *   proxy.lose();                // the primary's host is gone: its connections end, and new ones wait
 *                                // for a primary (with { silentReplication: true } a replication
 *                                // connection stays open and silent instead: it has not noticed yet)
 *   proxy.forwardTo(next.port);  // promoted: waiting and new connections go there
 *   proxy.endSilent();           // the silent connections end at last
 *
 * It reads one thing of the protocol: whether a connection's startup packet asks for replication.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

interface Pair {
  client: Socket;
  server: Socket | null;
  replication: boolean;
}

export class PgProxy {
  readonly port: number;
  readonly #server: Server;
  #target: number | null;
  readonly #pairs = new Set<Pair>();
  readonly #waiting = new Set<Socket>();
  readonly #silent = new Set<Socket>();

  private constructor(server: Server, port: number, target: number) {
    this.#server = server;
    this.port = port;
    this.#target = target;
  }

  /** Listens on a port the kernel picks; forwards to `target` (a loopback port). */
  static start(target: number): Promise<PgProxy> {
    return new Promise((resolve, reject) => {
      const server = createServer();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const proxy = new PgProxy(server, (server.address() as { port: number }).port, target);
        server.on('connection', (c) => proxy.#accept(c));
        resolve(proxy);
      });
    });
  }

  /** postgres://postgres@127.0.0.1:<proxy>/<database> */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Connections forwarded now, replication ones among them. */
  get connections(): { all: number; replication: number; waiting: number } {
    let replication = 0;
    for (const p of this.#pairs) if (p.replication) replication++;
    return { all: this.#pairs.size, replication, waiting: this.#waiting.size };
  }

  /** The primary is lost: see the file comment. */
  lose(o: { silentReplication?: boolean } = {}): void {
    this.#target = null;
    for (const p of [...this.#pairs]) {
      if (o.silentReplication && p.replication) this.#silence(p);
      else this.#drop(p);
    }
  }

  /** Only the replication connections go silent (their server side ends); the rest carry on. */
  silenceReplication(): void {
    for (const p of [...this.#pairs]) if (p.replication) this.#silence(p);
  }

  #silence(p: Pair): void {
    this.#pairs.delete(p);
    p.client.removeAllListeners('data');
    p.client.removeAllListeners('close');
    p.server?.removeAllListeners('close');
    p.server?.destroy();
    this.#silent.add(p.client);
  }

  /** Where connections go from now on; those waiting go there at once. */
  forwardTo(port: number): void {
    this.#target = port;
    for (const c of [...this.#waiting]) {
      this.#waiting.delete(c);
      this.#connect(c);
    }
  }

  endSilent(): void {
    for (const c of this.#silent) c.destroy();
    this.#silent.clear();
  }

  async stop(): Promise<void> {
    this.endSilent();
    for (const p of [...this.#pairs]) this.#drop(p);
    for (const c of this.#waiting) c.destroy();
    this.#waiting.clear();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  #accept(client: Socket): void {
    client.on('error', () => {});
    if (this.#target === null) {
      // No primary now: the connection waits (unread) until forwardTo().
      this.#waiting.add(client);
      client.on('close', () => this.#waiting.delete(client));
      return;
    }
    this.#connect(client);
  }

  #connect(client: Socket): void {
    const server = createConnection({ host: '127.0.0.1', port: this.#target! });
    const pair: Pair = { client, server, replication: false };
    this.#pairs.add(pair);
    let first = true;
    client.on('data', (d: Buffer) => {
      if (first) {
        first = false;
        // StartupMessage: length, protocol, then name\0value\0 pairs.
        pair.replication = d.includes('replication\0');
      }
      server.write(d);
    });
    server.on('data', (d: Buffer) => client.write(d));
    server.on('error', () => {});
    const close = () => this.#drop(pair);
    client.on('close', close);
    server.on('close', close);
  }

  #drop(p: Pair): void {
    if (!this.#pairs.delete(p)) return;
    p.client.destroy();
    p.server?.destroy();
  }
}
