/**
 * A webhook receiver for the HTTP sink's tests: a real node:http server on a loopback port of its
 * own, that does what a careful receiver does and what a failing one does.
 *
 * - Verifies every request as a Standard Webhooks receiver does (src/dev/webhook-verify.ts: from
 *   the specification, not the relay's signing code). A request that does not verify is answered
 *   401 and counted.
 * - Deduplicates by webhook-id (per array element by `id` for a batched body): `delivered` holds
 *   every event accepted (2xx) in arrival order, re-sent copies included; `unique` the first ones.
 * - Answers chosen events (`key#seq`) with scripted answers, one per attempt: a status (500, 429
 *   with Retry-After, 400 with a body, 302, a 2xx with headers too large to read), or a hang (no
 *   answer until the relay gives up).
 * - Can be killed (server closed, every connection destroyed) and restarted on the same port.
 */
import { appendFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { type PortLease, reservePort } from '../../src/dev/ports.ts';
import { verifyWebhook, webhookKeys } from '../../src/dev/webhook-verify.ts';

export type Answer =
  | {
      status: number;
      retryAfter?: string;
      body?: string;
      location?: string;
      sticky?: boolean;
      /** A header of this many bytes in the answer (past undici's 16 KiB: the answer cannot be read). */
      headerBytes?: number;
    }
  | 'hang';

export interface Delivery {
  id: string;
  key: string;
  seq: number;
  path: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

/** Every request, answered or not. */
export interface Attempt {
  webhookId: string;
  keys: string[];
  at: number;
  status: number | 'hang';
}

export class WebhookReceiver {
  readonly keys: Buffer[];
  readonly delivered: Delivery[] = [];
  readonly unique = new Map<string, Delivery>();
  readonly attempts: Attempt[] = [];
  badSignatures = 0;
  readonly #script = new Map<string, Answer[]>();
  readonly #sockets = new Set<Socket>();
  readonly #hanging = new Set<ServerResponse>();
  #server: Server | null = null;
  readonly #lease: PortLease;
  readonly #journal: string | undefined;

  private constructor(lease: PortLease, keys: Buffer[], journal: string | undefined) {
    this.#lease = lease;
    this.keys = keys;
    this.#journal = journal;
  }

  /**
   * `secrets`: the whsec_ secrets this receiver verifies with (any one matching is enough).
   * `port`: this one (a process of its own restarted on it, the chaos receiver), else one reserved.
   * `journal`: a file each accepted event is appended to (one JSON line, written before the 2xx
   * goes out, so it survives a kill -9 of this process): the chaos scenarios' read-back.
   */
  static async start(
    secrets: string[],
    opts: { port?: number; journal?: string } = {},
  ): Promise<WebhookReceiver> {
    const keys = webhookKeys(secrets);
    const lease = opts.port !== undefined ? { port: opts.port, release() {} } : await reservePort();
    const r = new WebhookReceiver(lease, keys, opts.journal);
    await r.restart();
    return r;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#lease.port}`;
  }

  /** The answers to the next attempts of event `key#seq`, in turn; a sticky one answers every attempt after. */
  script(event: string, ...answers: Answer[]): void {
    this.#script.set(event, answers);
  }

  /** Forgets the script and the requests seen (between tests; the port and the server stay). */
  reset(): void {
    this.#script.clear();
    this.attempts.length = 0;
    this.delivered.length = 0;
    this.unique.clear();
    this.badSignatures = 0;
  }

  /** Attempts that carried event `key#seq`. */
  attemptsOf(event: string): Attempt[] {
    return this.attempts.filter((a) => a.keys.includes(event));
  }

  async restart(): Promise<void> {
    const server = createServer((req, res) => void this.#handle(req, res));
    server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#lease.port, '127.0.0.1', () => resolve());
    });
    this.#server = server;
  }

  /** As a crash would: the listener closed and every connection destroyed, answers unsent. */
  async kill(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    if (!server) return;
    const closed = new Promise((r) => server.close(r));
    for (const s of this.#sockets) s.destroy();
    this.#hanging.clear();
    await closed;
  }

  async stop(): Promise<void> {
    await this.kill();
    this.#lease.release();
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const webhookId = String(req.headers['webhook-id']);
    if (!verifyWebhook(req.headers, body, this.keys)) {
      this.badSignatures++;
      this.attempts.push({ webhookId, keys: [], at: Date.now(), status: 401 });
      res.writeHead(401).end('bad signature');
      return;
    }
    const events = eventsOf(req, body, webhookId);
    const keys = events.map((e) => `${e.key}#${e.seq}`);
    let answer: Answer = { status: 204 };
    for (const k of keys) {
      const queue = this.#script.get(k);
      if (!queue || queue.length === 0) continue;
      const next = queue[0]!;
      if (next === 'hang' || !next.sticky) queue.shift();
      answer = next;
      break;
    }
    this.attempts.push({
      webhookId,
      keys,
      at: Date.now(),
      status: answer === 'hang' ? 'hang' : answer.status,
    });
    if (answer === 'hang') {
      this.#hanging.add(res);
      return;
    }
    if (answer.status >= 200 && answer.status < 300)
      for (const e of events) {
        const d: Delivery = { ...e, path: req.url ?? '', headers: req.headers, body: e.body };
        this.delivered.push(d);
        if (!this.unique.has(d.id)) this.unique.set(d.id, d);
        if (this.#journal)
          appendFileSync(
            this.#journal,
            `${JSON.stringify({ id: d.id, topic: String(req.headers['outbox-topic'] ?? ''), value: d.body.toString('base64') })}\n`,
          );
      }
    const headers: Record<string, string> = {};
    if (answer.retryAfter !== undefined) headers['retry-after'] = answer.retryAfter;
    if (answer.location !== undefined) headers.location = answer.location;
    if (answer.headerBytes !== undefined) headers['x-padding'] = 'p'.repeat(answer.headerBytes);
    res.writeHead(answer.status, headers).end(answer.body ?? '');
  }
}

/** The events of a request: the body itself (one event), or each element of a batch's JSON array. */
function eventsOf(
  req: IncomingMessage,
  body: Buffer,
  webhookId: string,
): Omit<Delivery, 'path' | 'headers'>[] {
  const seqOf = (v: unknown) => {
    const seq = (v as { seq?: unknown } | null)?.seq;
    return typeof seq === 'number' ? seq : -1;
  };
  if (webhookId.startsWith('batch_')) {
    const items = JSON.parse(body.toString()) as {
      id: string;
      aggregate_id: string;
      data?: unknown;
      data_base64?: string;
    }[];
    return items.map((it) => ({
      id: it.id,
      key: it.aggregate_id,
      seq: seqOf(it.data),
      body: it.data_base64 ? Buffer.from(it.data_base64, 'base64') : Buffer.from(JSON.stringify(it.data)),
    }));
  }
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(body.toString());
  } catch {}
  return [
    { id: webhookId, key: String(req.headers['outbox-header-aggregate_id'] ?? ''), seq: seqOf(parsed), body },
  ];
}
