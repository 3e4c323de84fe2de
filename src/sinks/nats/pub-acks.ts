/**
 * JetStream publishes whose PubAcks come back on one reply subscription, instead of nats.js'
 * request() per message (what jetstream.publish() does).
 *
 * Measured reason (a 20,000-event publish loop against a throwaway nats-server, --cpu-prof):
 * request() costs the relay ~45 µs of CPU per event, a third of it in Error constructors — it
 * builds a RequestError with a captured stack for every request it *completes* (its cancel()
 * rejects the already-settled promise with a fresh "cancelled" error) and, unless noAsyncTraces,
 * two more per request up front — plus a timer and a Promise.race per message. Here: one
 * subscription to `<inbox>.*` for the connection's life, a token per message, one sweep timer for
 * timeouts.
 *
 * What stays the library's: the message (subject, payload, the row's headers plus
 * Nats-Msg-Id, published with nc.publish as request() does), and an API error's parsing — the
 * library's own parseJsResponse (BaseApiClientImpl), so it is the same JetStreamApiError the
 * classifier knows (src/sinks/nats/nats-errors.ts); a PubAck without an error is read with one
 * shared TextDecoder (parseJsResponse builds one per message). As request() does: a
 * reply with status 503 and no data (no responders: no stream listens, or its server restarts)
 * raises JetStreamNotEnabled; no reply within the timeout raises TimeoutError; a closed
 * connection fails what is pending. The test (pub-acks.test.ts) compares both paths' answers.
 *
 * The message goes out as one HPUB frame built here (hpubFrame) and handed to the connection's
 * own outbound buffer (ProtocolHandler.sendCommand: the same buffering, flushing and re-sending
 * after a reconnect as nc.publish()). Measured reason: nc.publish() encodes each message's
 * "HPUB …" line with TextEncoder.encode, which allocates an ArrayBuffer of its own per call —
 * ~2.3 µs against ~0.2 µs for the same line written into a pooled Buffer (a micro-benchmark on
 * this machine), and its external memory is the garbage collector's work afterwards. Anything
 * unusual — a closed or draining connection, no server INFO yet, a server without headers, a
 * message over max_payload, a subject the library would refuse — takes nc.publish(), so its
 * errors are the library's own. The test compares the frame with the bytes nc.publish() hands
 * to sendCommand.
 */
import { BaseApiClientImpl, jserrors, type PubAck } from '@nats-io/jetstream/internal';
import {
  createInbox,
  errors,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type NatsConnectionImpl,
  type Subscription,
} from '@nats-io/transport-node';

/** Called once per publish: with its PubAck, or with why there is none. */
export type PubAckCallback = (err: unknown, ack?: PubAck) => void;

interface Pending {
  done: PubAckCallback;
  deadline: number;
}

/** One decoder for every PubAck (parseJsResponse builds a TextDecoder per message). */
const TD = new TextDecoder();

/** A message's header block as nc.publish() writes it (MsgHdrsImpl.encode(): not in the public type). */
const encoded = (h: MsgHdrs): Uint8Array => (h as unknown as { encode(): Uint8Array }).encode();

/** What nc.publish() refuses in a subject (NatsConnectionImpl._check). */
const WHITESPACE = /[ \n\r\t]/;
const MAX_SUBJECTS = 1024;

/**
 * The bytes nc.publish(subject, data, { reply, headers }) writes (ProtocolHandler.publish):
 * `HPUB <subject> <reply> <header bytes> <total bytes>\r\n<headers><data>\r\n`, in one Buffer
 * (from Node's pool for a small message).
 */
export function hpubFrame(subject: string, reply: string, headers: Uint8Array, data: Uint8Array): Buffer {
  const hlen = headers.length;
  const len = hlen + data.length;
  const line = `HPUB ${subject} ${reply} ${hlen} ${len}\r\n`;
  const at = Buffer.byteLength(line);
  const frame = Buffer.allocUnsafe(at + len + 2);
  frame.write(line, 0);
  frame.set(headers, at);
  frame.set(data, at + hlen);
  frame[at + len] = 13;
  frame[at + len + 1] = 10;
  return frame;
}

export class PubAcks {
  readonly #nc: NatsConnection;
  readonly #timeoutMs: number;
  readonly #prefix: string;
  readonly #sub: Subscription;
  readonly #parser: BaseApiClientImpl;
  readonly #pending = new Map<string, Pending>();
  /** Subjects found acceptable to nc.publish() (bounded as header-block.ts' names). */
  readonly #subjects = new Set<string>();
  #next = 0;
  #sweep: NodeJS.Timeout | null = null;

  constructor(nc: NatsConnection, timeoutMs: number) {
    this.#nc = nc;
    this.#timeoutMs = timeoutMs;
    this.#prefix = `${createInbox()}.`;
    this.#parser = new BaseApiClientImpl(nc);
    this.#sub = nc.subscribe(`${this.#prefix}*`, { callback: (err, m) => this.#reply(err, m) });
    void this.#sub.closed.then(() => this.#failAll(new errors.ClosedConnectionError()));
  }

  /**
   * Publishes one message; `done` gets its PubAck, or the error (a JetStream error as
   * jetstream.publish() raises it). A callback, not a promise: one fewer allocation and microtask
   * per event on the sink's hot path (key-lanes.ts takes callbacks too).
   */
  send(subject: string, data: Uint8Array, headers: MsgHdrs, done: PubAckCallback): void {
    const token = (this.#next++).toString(36);
    this.#pending.set(token, { done, deadline: Date.now() + this.#timeoutMs });
    this.#sweep ??= setInterval(() => this.#expire(), Math.min(250, this.#timeoutMs / 4));
    try {
      const reply = this.#prefix + token;
      const h = encoded(headers);
      const p = this.#fastPath(subject, h.length + data.length);
      if (p) {
        p.outMsgs++;
        p.outBytes += h.length + data.length;
        p.sendCommand(hpubFrame(subject, reply, h, data));
      } else this.#nc.publish(subject, data, { reply, headers });
    } catch (e) {
      this.#pending.delete(token);
      done(e);
    }
  }

  /**
   * The connection's protocol handler when the frame may be written directly: the checks
   * nc.publish() makes before it writes (NatsConnectionImpl._check, ProtocolHandler.publish) all
   * pass. Otherwise null, and nc.publish() raises its own error.
   */
  #fastPath(subject: string, len: number): NatsConnectionImpl['protocol'] | null {
    const p = (this.#nc as NatsConnectionImpl).protocol;
    const info = p?.info;
    if (!info?.headers || len > info.max_payload || p.noMorePublishing || this.#nc.isClosed()) return null;
    if (!this.#subjects.has(subject)) {
      if (subject.length === 0 || WHITESPACE.test(subject)) return null;
      if (this.#subjects.size < MAX_SUBJECTS) this.#subjects.add(subject);
    }
    return p;
  }

  /** send() as a promise. */
  publish(subject: string, data: Uint8Array, headers: MsgHdrs): Promise<PubAck> {
    return new Promise<PubAck>((resolve, reject) =>
      this.send(subject, data, headers, (e, a) => (e ? reject(e) : resolve(a!))),
    );
  }

  #reply(err: Error | null, m: Msg): void {
    if (err) {
      this.#failAll(err);
      return;
    }
    const token = m.subject.slice(this.#prefix.length);
    const p = this.#pending.get(token);
    if (!p) return; // timed out already
    this.#pending.delete(token);
    const data = m.data;
    if (data.length === 0 && m.headers?.code === 503) {
      p.done(
        new jserrors.JetStreamNotEnabled('jetstream is not enabled', {
          cause: new errors.RequestError('no responders', { cause: new errors.NoRespondersError(m.subject) }),
        }),
      );
      return;
    }
    let a: PubAck & { error?: unknown };
    try {
      a = JSON.parse(TD.decode(data));
      // An API error: the library's parser raises the error it would (the classifier's input).
      if (a.error) a = this.#parser.parseJsResponse(m) as PubAck;
    } catch (e) {
      p.done(e);
      return;
    }
    a.duplicate = a.duplicate === true; // as jetstream.publish() sets it
    p.done(null, a);
  }

  #expire(): void {
    const now = Date.now();
    for (const [token, p] of this.#pending)
      if (p.deadline <= now) {
        this.#pending.delete(token);
        p.done(new errors.TimeoutError());
      }
    if (this.#pending.size === 0 && this.#sweep) {
      clearInterval(this.#sweep);
      this.#sweep = null;
    }
  }

  #failAll(e: unknown): void {
    const all = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of all) p.done(e);
    if (this.#sweep) clearInterval(this.#sweep);
    this.#sweep = null;
  }

  close(): void {
    this.#sub.unsubscribe();
    this.#failAll(new errors.ClosedConnectionError());
  }
}
