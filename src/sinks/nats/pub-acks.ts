/**
 * JetStream publishes whose PubAcks come back on one reply subscription, instead of nats.js'
 * request() per message (what jetstream.publish() does).
 *
 * Measured reason (a 20,000-event publish loop against a throwaway nats-server, --cpu-prof):
 * request() costs the relay ~45 µs of CPU per event, a third of it in Error constructors — it
 * builds a RequestError with a captured stack for every request it *completes* (its cancel()
 * rejects the already-settled promise with a fresh "cancelled" error) and, unless noAsyncTraces,
 * two more per request up front — plus a timer and a Promise.race per message. Here: one
 * subscription to `<inbox>.*` for the connection's life, a decimal token per message (the
 * pending callbacks in one Map by token), one sweep timer for timeouts (marks, not a deadline
 * per message).
 *
 * The way back. A stored or duplicate PubAck — a MSG on this subscription in one of the forms
 * src/sinks/nats/puback-json.ts reads — is taken straight from the connection's bytes (take(),
 * called by src/sinks/nats/inbound-frames.ts, which cuts the frames in front of nats.js' Parser):
 * no Parser state machine, MsgImpl, TextDecoder or JSON.parse per event. Everything else reaches
 * #reply through the library, as before: an API error is parsed by the library's own
 * parseJsResponse (BaseApiClientImpl), so it is the same JetStreamApiError the classifier knows
 * (src/sinks/nats/nats-errors.ts); a reply with status 503 and no data (an HMSG: no responders —
 * no stream listens, or its server restarts) raises JetStreamNotEnabled as request() does; no
 * reply within the timeout raises TimeoutError; a closed connection fails what is pending. The
 * tests compare both paths' answers (pub-acks.test.ts), and the splitter with nats.js' Parser on
 * the same bytes (inbound-frames.test.ts).
 *
 * The way out. The message goes as one HPUB frame written by the sink into a slab handed to the
 * connection's own outbound buffer (src/sinks/nats/outbound-frames.ts: the library's buffering
 * and flushing; its header block written in place by header-block.ts). Anything unusual — a
 * closed or draining connection, no server INFO yet, a server without headers, a message over
 * max_payload, a subject the library would refuse, headers given as nats.js MsgHdrs — takes
 * nc.publish(), so its errors are the library's own. The test compares the frames with the bytes
 * nc.publish() hands to sendCommand.
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
import { HeaderBlock } from './header-block.ts';
import { decimal, type FrameSplitter, type FrameTaker, inboundFrames } from './inbound-frames.ts';
import { missingNatsInternals } from './internals.ts';
import { OutboundFrames } from './outbound-frames.ts';
import { parsePubAck } from './puback-json.ts';

/** Called once per publish: with its PubAck, or with why there is none. */
export type PubAckCallback = (err: unknown, ack?: PubAck) => void;

/** One decoder for every PubAck (parseJsResponse builds a TextDecoder per message). */
const TD = new TextDecoder();

/** A message's header block as nc.publish() writes it (MsgHdrsImpl.encode(): not in the public type). */
const encoded = (h: MsgHdrs): Uint8Array => (h as unknown as { encode(): Uint8Array }).encode();

/** What nc.publish() refuses in a subject (NatsConnectionImpl._check). */
const WHITESPACE = /[ \n\r\t]/;
const MAX_SUBJECTS = 1024;

let fast: { inbound: boolean; outbound: boolean } | null = null;

/** Which fast paths find nats.js' internals as they expect (internals.ts), checked once per process. */
function fastPaths(): { inbound: boolean; outbound: boolean } {
  fast ??= {
    inbound: missingNatsInternals('inbound-frames').length === 0,
    outbound: missingNatsInternals('outbound-frames').length === 0,
  };
  return fast;
}

export class PubAcks implements FrameTaker {
  readonly #nc: NatsConnection;
  readonly #timeoutMs: number;
  readonly #prefix: string;
  readonly #sub: Subscription;
  readonly #parser: BaseApiClientImpl;
  /** The callback of each publish awaiting its PubAck, by token (ascending: tokens are sent in order). */
  readonly #pending = new Map<number, PubAckCallback>();
  /**
   * The timeout clock, without a deadline per publish: pairs [token, time], one per sweep, each
   * saying that every token below it was sent before that time. A token expires once a mark
   * above it is older than the timeout: between 1 and ~2 sweeps past it.
   */
  #marks: number[] = [];
  /** Subjects found acceptable to nc.publish() (bounded as header-block.ts' names). */
  readonly #subjects = new Set<string>();
  /** The connection's inbound frames (src/sinks/nats/inbound-frames.ts); null: the library reads all. */
  readonly #frames: FrameSplitter | null;
  /** This publisher's frames (src/sinks/nats/outbound-frames.ts), made on the first fast publish. */
  #out: OutboundFrames | null = null;
  #next = 0;
  #sweep: NodeJS.Timeout | null = null;

  constructor(nc: NatsConnection, timeoutMs: number) {
    this.#nc = nc;
    this.#timeoutMs = timeoutMs;
    this.#prefix = `${createInbox()}.`;
    this.#parser = new BaseApiClientImpl(nc);
    this.#sub = nc.subscribe(`${this.#prefix}*`, { callback: (err, m) => this.#reply(err, m) });
    void this.#sub.closed.then(() => this.#failAll(new errors.ClosedConnectionError()));
    this.#frames = fastPaths().inbound ? inboundFrames(nc) : null;
    this.#frames?.setTaker(this.#sub.getID(), this);
  }

  /**
   * Publishes one message; `done` gets its PubAck, or the error (a JetStream error as
   * jetstream.publish() raises it). A callback, not a promise: one fewer allocation and microtask
   * per event on the sink's hot path (key-lanes.ts takes callbacks too).
   */
  send(subject: string, data: Uint8Array, headers: MsgHdrs, done: PubAckCallback): void {
    const token = this.#next++;
    this.#pending.set(token, done);
    if (this.#sweep === null) {
      this.#marks = [token, Date.now()];
      this.#sweep = setInterval(() => this.#expire(), Math.min(250, this.#timeoutMs / 4));
    }
    try {
      const block = headers instanceof HeaderBlock ? headers : encoded(headers);
      if (!this.#fastPath(subject)?.hpub(subject, this.#prefix, token, block, data))
        this.#nc.publish(subject, data, { reply: this.#prefix + token, headers });
    } catch (e) {
      this.#pending.delete(token);
      done(e);
    }
  }

  /**
   * The sink's own frame writer when the frame may be written directly: the checks nc.publish()
   * makes before it writes (NatsConnectionImpl._check, ProtocolHandler.publish) pass — but the
   * size, which OutboundFrames.hpub() checks. Otherwise null, and nc.publish() raises its own error.
   */
  #fastPath(subject: string): OutboundFrames | null {
    if (!fastPaths().outbound) return null;
    const p = (this.#nc as NatsConnectionImpl).protocol;
    if (!p?.info?.headers || p.noMorePublishing || this.#nc.isClosed()) return null;
    if (!this.#subjects.has(subject)) {
      if (subject.length === 0 || WHITESPACE.test(subject)) return null;
      if (this.#subjects.size < MAX_SUBJECTS) this.#subjects.add(subject);
    }
    return (this.#out ??= new OutboundFrames(p));
  }

  /** send() as a promise. */
  publish(subject: string, data: Uint8Array, headers: MsgHdrs): Promise<PubAck> {
    return new Promise<PubAck>((resolve, reject) =>
      this.send(subject, data, headers, (e, a) => (e ? reject(e) : resolve(a!))),
    );
  }

  /**
   * A PubAck frame read from the connection's bytes (FrameTaker): taken when it answers a pending
   * publish in one of the forms puback-json.ts reads; anything else is left to the library, whose
   * subscription callback (#reply) then gets it.
   */
  take(buf: Buffer, subject: number, subjectEnd: number, data: number, dataEnd: number): boolean {
    const token = decimal(buf, subject + this.#prefix.length, subjectEnd);
    const done = this.#pending.get(token);
    if (done === undefined) return false;
    const ack = parsePubAck(buf, data, dataEnd);
    if (ack === null) return false;
    this.#pending.delete(token);
    // What ProtocolHandler.processMsg counts for a message it dispatches.
    const p = (this.#nc as NatsConnectionImpl).protocol;
    p.inMsgs++;
    p.inBytes += dataEnd - data;
    (this.#sub as unknown as { received: number }).received++;
    done(null, ack as PubAck);
    return true;
  }

  #reply(err: Error | null, m: Msg): void {
    if (err) {
      this.#failAll(err);
      return;
    }
    const token = Number(m.subject.slice(this.#prefix.length));
    const done = this.#pending.get(token);
    if (!done) return; // timed out already
    this.#pending.delete(token);
    const data = m.data;
    if (data.length === 0 && m.headers?.code === 503) {
      done(
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
      done(e);
      return;
    }
    a.duplicate = a.duplicate === true; // as jetstream.publish() sets it
    done(null, a);
  }

  /** The sweep: fails what waited longer than the timeout, and marks the clock. */
  #expire(): void {
    const now = Date.now();
    const marks = this.#marks;
    let below = -1;
    let used = 0;
    while (used < marks.length && marks[used + 1]! <= now - this.#timeoutMs) {
      below = marks[used]!;
      used += 2;
    }
    if (used > 0) marks.splice(0, used);
    if (below >= 0)
      for (const [token, done] of this.#pending) {
        if (token >= below) break;
        this.#pending.delete(token);
        done(new errors.TimeoutError());
      }
    if (this.#pending.size === 0) this.#stopSweep();
    else marks.push(this.#next, now);
  }

  #stopSweep(): void {
    if (this.#sweep) clearInterval(this.#sweep);
    this.#sweep = null;
    this.#marks = [];
  }

  #failAll(e: unknown): void {
    const all = [...this.#pending.values()];
    this.#pending.clear();
    for (const done of all) done(e);
    this.#stopSweep();
  }

  close(): void {
    this.#frames?.setTaker(this.#sub.getID(), null);
    this.#sub.unsubscribe();
    this.#failAll(new errors.ClosedConnectionError());
  }
}
