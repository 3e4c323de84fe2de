import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Config } from '../../config/load.ts';
import type { Classified } from '../../errors.ts';
import type { Logger } from '../../observability/logger.ts';
import type { OutboundMessage } from '../../route/event.ts';
import { dedupId } from '../dedup-id.ts';
import { sendInLanes } from '../key-lanes.ts';
import type { Sink } from '../sink.ts';
import { HeaderError, headerBlock } from './header-block.ts';
import { classifyNatsError, NatsSinkError } from './nats-errors.ts';
import { PubAcks } from './pub-acks.ts';
import {
  isPublishSubject,
  retryHorizonMs,
  type StreamFacts,
  streamProblem,
  subjectsOverlap,
  templatePattern,
} from './streams.ts';

export type NatsSinkConfig = Pick<
  Config,
  | 'natsServers'
  | 'natsUser'
  | 'natsPassword'
  | 'natsToken'
  | 'natsTimeoutMs'
  | 'natsMaxPending'
  | 'retryMaxMs'
  | 'topicTemplate'
  | 'topicOverrides'
  | 'deadLetterTopic'
>;

/**
 * NATS JetStream. Each event is one JetStream publish to the subject the router chose (the topic
 * template: `outbox.event.{aggregate_type}` by default), with `Nats-Msg-Id` = the event id, so
 * the stream's duplicate window drops a re-sent copy and answers `duplicate: true` (success:
 * the message is stored). The row's headers go as NATS headers.
 *
 * Ordering. JetStream stores a stream's messages in the order its server receives them, and one
 * connection delivers publishes in the order they were written — but only while every publish is
 * taken: a message refused or lost in a reconnect while the next one is stored comes back after
 * it. So at most one publish per key (per subject) awaits its PubAck (src/sinks/key-lanes.ts);
 * other keys share --nats-max-pending. A key's event n+1 is sent only once n is stored.
 *
 * publish() resolves once every message of the batch has its PubAck; any failure rejects it after
 * the publishes in flight settled, and the relay re-sends the batch (duplicates dropped by the
 * window) or, for a permanent failure, each event alone to find which one is refused.
 */
export class NatsSink implements Sink {
  readonly name = 'nats';
  readonly #c: NatsSinkConfig;
  readonly #log: Logger;
  #nc: NatsConnection | null = null;
  #connecting: Promise<NatsConnection> | null = null;
  /** PubAcks of this connection's publishes (src/sinks/nats/pub-acks.ts). */
  #acks: PubAcks | null = null;
  #jsm: JetStreamManager | null = null;
  /** Subjects already found in a good stream (a failure forgets the subject's entry). */
  readonly #checked = new Set<string>();
  #tail: Promise<unknown> = Promise.resolve();
  /** PubAcks that said `duplicate: true`: re-sends the duplicate window dropped (tests, logs). */
  duplicateAcks = 0;

  constructor(c: NatsSinkConfig, log: Logger) {
    this.#c = c;
    this.#log = log.child({ component: 'nats' });
  }

  async #connect(): Promise<NatsConnection> {
    if (this.#nc && !this.#nc.isClosed()) return this.#nc;
    this.#connecting ??= (async () => {
      const c = this.#c;
      try {
        const nc = await connect({
          servers: c.natsServers,
          user: c.natsUser,
          pass: c.natsPassword,
          token: c.natsToken,
          name: 'pg-outbox-relay',
          // Never give up: the relay itself decides to stop; a PubAck wait is what times out.
          maxReconnectAttempts: -1,
          reconnectTimeWait: 500,
          // A frozen server is noticed within ~2 × 5 s and the connection rebuilt.
          pingInterval: 5000,
          maxPingOut: 2,
          timeout: c.natsTimeoutMs,
          // Without it every publish builds two Error objects (their stacks captured) in case its
          // PubAck fails: ~30 % of the relay's CPU in a bulk drain (bench/sinks.ts, --cpu-prof).
          // A failed publish still says why; it loses only the publishing caller's stack.
          noAsyncTraces: true,
        });
        this.#nc = nc;
        this.#acks = new PubAcks(nc, c.natsTimeoutMs);
        this.#jsm = await jetstreamManager(nc, { timeout: c.natsTimeoutMs, checkAPI: false });
        void (async () => {
          for await (const s of nc.status()) {
            if (s.type === 'disconnect' || s.type === 'reconnect')
              this.#log.warn({ event: s.type }, `NATS connection: ${s.type}`);
          }
        })().catch(() => {});
        return nc;
      } finally {
        this.#connecting = null;
      }
    })();
    return this.#connecting;
  }

  /**
   * Preflight: JetStream answers, some stream listens on the subjects the topic template can
   * produce, and every such stream keeps the promise (file storage, duplicate window ≥ the retry
   * horizon). A failure is the relay's start failing (logged with the fix, retried: fixing the
   * stream is enough, no restart). The dead-letter subject only warns, as for Kafka.
   */
  async start(): Promise<void> {
    await this.#connect();
    const jsm = this.#jsm!;
    const streams: StreamFacts[] = [];
    for await (const si of jsm.streams.list()) streams.push(facts(si));
    const horizon = retryHorizonMs(this.#c);
    const templates = [this.#c.topicTemplate, ...Object.values(this.#c.topicOverrides)];
    for (const t of templates) {
      const pattern = templatePattern(t);
      const matching = streams.filter((s) => s.subjects.some((x) => subjectsOverlap(x, pattern)));
      if (matching.length === 0)
        throw new NatsSinkError(
          'NO_STREAM',
          `no JetStream stream listens on ${pattern} (the subjects of topic template ${JSON.stringify(t)}): create one (nats stream add OUTBOX --subjects '${pattern}' --storage file --dupe-window 2m), or change --topic-template / --topic-override`,
        );
      for (const s of matching) {
        const problem = streamProblem(s, horizon);
        if (problem) throw new NatsSinkError('STREAM_CONFIG', problem);
      }
    }
    const dl = this.#c.deadLetterTopic;
    if (dl) {
      const s = streams.find((x) => x.subjects.some((p) => subjectsOverlap(p, dl)));
      const problem = s ? streamProblem(s, horizon) : `no JetStream stream listens on ${dl}`;
      if (problem)
        this.#log.warn(
          { subject: dl, problem },
          `dead-letter subject ${dl} is not usable (${problem}): events that become dead will stay 'dead' in the outbox but not reach it`,
        );
    }
    this.#log.info({ streams: streams.map((s) => s.name), horizonMs: horizon }, 'NATS JetStream checked');
  }

  publish(batch: readonly OutboundMessage[]): Promise<void> {
    const run = this.#tail.then(() => this.#publish(batch));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #publish(batch: readonly OutboundMessage[]): Promise<void> {
    // Awaited only when there is something to wait for: a live stream's batches are an event or
    // two, and each await of an async call is a promise and a microtask turn more per batch.
    if (!this.#nc || this.#nc.isClosed()) await this.#connect();
    for (const m of batch) if (!this.#checked.has(m.topic)) await this.#checkSubject(m.topic);
    const acks = this.#acks!;
    // A lane is a key on a subject; a batch on one subject (a bulk drain's) needs no joined string.
    const topic = batch[0]?.topic;
    const oneTopic = batch.every((m) => m.topic === topic);
    const failures = await sendInLanes(
      batch,
      oneTopic ? (m) => m.key : (m) => `${m.topic}\u0000${m.key}`,
      this.#c.natsMaxPending,
      (m, done) =>
        acks.send(m.topic, m.value ?? EMPTY, headerBlock(m.headers, dedupId(m)), (e, ack) => {
          if (e) done(e instanceof HeaderError ? invalidMessage(m, e) : e);
          else if (!ack!.stream) done(new NatsSinkError('NO_PUBACK', `no stream acknowledged ${m.topic}`));
          else {
            if (ack!.duplicate) this.duplicateAcks++;
            done();
          }
        }),
    );
    if (failures.length === 0) return;
    const first = failures.find((f) => this.classify(f.error).class === 'permanent') ?? failures[0]!;
    this.#checked.delete(first.item.topic);
    throw await this.#explain(first.item.topic, first.error);
  }

  /** A subject's first publish (and the first after a failure) asks which stream holds it. */
  async #checkSubject(subject: string): Promise<void> {
    if (this.#checked.has(subject)) return;
    if (!isPublishSubject(subject))
      throw new NatsSinkError('INVALID_SUBJECT', `${JSON.stringify(subject)} is not a NATS subject`);
    const name = await this.#streamOf(subject);
    if (name === null) throw noStream(subject);
    const problem = streamProblem(facts(await this.#jsm!.streams.info(name)), retryHorizonMs(this.#c));
    if (problem) throw new NatsSinkError('STREAM_CONFIG', problem);
    this.#checked.add(subject);
  }

  /** The stream that holds `subject`; null only when JetStream answers that none does. */
  async #streamOf(subject: string): Promise<string | null> {
    try {
      return await this.#jsm!.streams.find(subject);
    } catch (e) {
      if ((e as Error).name === 'StreamNotFoundError') return null;
      throw e;
    }
  }

  /**
   * "No responders" means no stream listens on the subject — or its server is restarting. Only
   * JetStream saying "no stream matches" makes it the permanent NO_STREAM.
   */
  async #explain(subject: string, e: unknown): Promise<unknown> {
    if ((e as Error)?.name !== 'JetStreamNotEnabled') return e;
    const name = await this.#streamOf(subject).catch(() => undefined);
    return name === null ? noStream(subject, e) : e;
  }

  classify(e: unknown): Classified {
    return classifyNatsError(e);
  }

  async stop(): Promise<void> {
    await this.#tail;
    const nc = this.#nc;
    this.#nc = null;
    this.#acks?.close();
    this.#acks = null;
    if (nc && !nc.isClosed()) await nc.drain().catch(() => nc.close());
  }
}

function noStream(subject: string, cause?: unknown): NatsSinkError {
  return new NatsSinkError(
    'NO_STREAM',
    `no JetStream stream listens on ${subject}: add the subject to a stream (file storage), or change --topic-template / --topic-override`,
    { cause },
  );
}

function facts(si: {
  config: { name: string; storage: string; duplicate_window?: number; subjects?: string[] };
}): StreamFacts {
  return {
    name: si.config.name,
    storage: si.config.storage,
    duplicateWindowNs: si.config.duplicate_window ?? 0,
    subjects: si.config.subjects ?? [],
  };
}

const EMPTY = new Uint8Array(0);

/**
 * A header the block cannot carry (src/sinks/nats/header-block.ts: checked as it is written into
 * the frame): the event's permanent failure.
 */
function invalidMessage(m: OutboundMessage, e: HeaderError): NatsSinkError {
  return new NatsSinkError('INVALID_MESSAGE', `event ${m.event.eventId}: ${e.message}`, { cause: e });
}
