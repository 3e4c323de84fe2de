import { randomBytes } from 'node:crypto';
import type {
  CompressionTypes,
  Kafka,
  Message,
  Producer,
  ProducerConfig,
  RecordMetadata,
  Transaction,
} from 'kafkajs';
import { ErrorCode, errorMessage, RelayError } from '../../errors.ts';
import { idRanges } from '../../lifecycle/id-ranges.ts';
import type { Logger } from '../../observability/logger.ts';
import { classifyKafkaError, isFenced } from './kafka-errors.ts';
import { OpenTransactionError, TopicLog } from './kafka-log-reader.ts';
import { encodeProgress, type KafkaProgress, readLatestProgress } from './kafka-progress.ts';
import { type PartitionLedger, UnacknowledgedPartitionsError } from './partition-acks.ts';

/**
 * Exactly-once delivery (docs/delivery.md): every publish is one Kafka transaction holding
 * the batch AND the slot's progress record (kafka-progress.ts), so a read_committed consumer sees
 * a batch exactly when Kafka's record of it is committed too.
 *
 * What the relay takes from kafkajs and what it does not trust:
 *  - kafkajs' transaction manager (InitProducerId, AddPartitionsToTxn, EndTxn) and the relay's
 *    own sendMessages (kafkajs/send-messages.ts), which registers each partition with the
 *    transaction before its first record batch and writes the transactional attribute, producer
 *    id, epoch and sequences into the batches (produce-encoder.ts);
 *  - NOT kafkajs' recovery from a failed transaction (#469: abort after a failure leaves its
 *    state machine stuck; a failed EndTxn is not retried): after ANY error inside a transaction
 *    the producer is dropped. A new producer's InitProducerId with the same transactional id
 *    makes the coordinator finish the old transaction (abort it, or complete a commit already
 *    prepared; kafkajs retries CONCURRENT_TRANSACTIONS meanwhile) and fences the old epoch.
 *    Then the progress record, read back read_committed, says whether the transaction committed
 *    — the only way to know after an EndTxn whose answer was lost; when it says not, the
 *    transaction's first event record is asked too (#settle: a progress-topic part aborted by
 *    hand after its commit marker went missing).
 *  - Fencing: a producer told it is fenced, or a progress record written by someone else since
 *    this relay's last commit, ends the relay (PRODUCER_FENCED, exit 75). It never re-initializes
 *    after a foreign write: that would fence the relay that took over and publish again what it
 *    published.
 *
 * `pending`: ids committed to Kafka that PostgreSQL's progress record may not hold yet. Every
 * transaction's progress record carries them, so at any moment Kafka's latest record ∪
 * PostgreSQL's record covers every id Kafka holds; the stream drops ids once PostgreSQL records
 * them (`recorded`).
 */
export interface TransactionalConfig {
  transactionalId: string;
  progressTopic: string;
  transactionTimeoutMs: number;
}

/** A transaction whose commit was sent but whose outcome is not known yet. */
interface Unresolved {
  token: string;
  /** The batch's event ids, joined: a retry of the same batch is told by it. */
  key: string;
  ids: readonly string[];
  /** Where its first event record went (the broker's answer): the data's own word on the outcome. */
  probe: Probe | null;
}

/** One record a transaction wrote: its topic, partition and offset. */
interface Probe {
  topic: string;
  partition: number;
  offset: number;
}

/** The outbox id of a message (the sink hands over its OutboundMessages as kafkajs Messages). */
function idOf(m: Message): string {
  return (m as unknown as { event: { id: string } }).event.id;
}

function batchKey(batch: readonly { event: { id: string } }[]): string {
  return batch.map((m) => m.event.id).join(',');
}

export class TransactionalPublisher {
  readonly #kafka: Kafka;
  readonly #config: ProducerConfig;
  readonly #c: TransactionalConfig;
  readonly #log: Logger;
  readonly #instance = randomBytes(6).toString('hex');
  #producer: Producer | null = null;
  #seq = 0;
  /** The token of the last progress record this relay knows committed (its own, or read at start). */
  #lastToken: string | null = null;
  /** Whether #lastToken was ever set: the first read after our own fencing accepts any token. */
  #knowsLast = false;
  #unresolved: Unresolved | null = null;
  /** The last transaction of unknown outcome found committed: its batch, sent again, is not sent twice. */
  #committedUnknown: Unresolved | null = null;
  /** Other processes' tokens this relay read as the last record (at start; a few per process). */
  readonly #readTokens = new Set<string>();
  readonly #pending = new Set<string>();
  /** The database timeline the ids belong to (KafkaProgress.timeline); null until told. */
  #timeline: string | null = null;
  #fenced: RelayError | null = null;
  /** The clients of a start in progress (#ready's producer, #ensureTopic's admin): abandonStart drops them. */
  readonly #starting = new Set<{ disconnect(): Promise<void> }>();
  /** abandonStart calls so far: a producer made ready across one is dropped. */
  #abandoned = 0;
  /** Transactions committed / aborted by replacing the producer (tests, metrics, logs). */
  commits = 0;
  replacements = 0;
  /** Times the progress topic was found deleted and recreated. */
  progressTopicLosses = 0;
  /** The open transaction the last whole read gave up on: found again by the next, it is reported as hanging. */
  #stillOpen: {
    topic: string;
    partition: number;
    startOffset: number;
    since: number;
    reported: boolean;
  } | null = null;

  constructor(kafka: Kafka, producerConfig: ProducerConfig, c: TransactionalConfig, log: Logger) {
    this.#kafka = kafka;
    this.#c = c;
    this.#log = log.child({ transactionalId: c.transactionalId });
    this.#config = {
      ...producerConfig,
      transactionalId: c.transactionalId,
      transactionTimeout: c.transactionTimeoutMs,
      idempotent: true,
      maxInFlightRequests: 1,
    };
  }

  /** Set once this relay was fenced: every later publish rejects with it. */
  get fenced(): RelayError | null {
    return this.#fenced;
  }

  get transactionalId(): string {
    return this.#c.transactionalId;
  }

  /**
   * A producer whose InitProducerId went through: every older producer of the id is fenced.
   * A replacement (after an error inside a transaction) first checks, before fencing anyone,
   * that nobody else wrote the progress record since this relay's last commit, and after its
   * InitProducerId reads the record again: it resolves a commit of unknown outcome, and a
   * foreign record fences this relay instead of letting it publish again what another relay did.
   */
  async #ready(): Promise<Producer> {
    if (this.#fenced) throw this.#fenced;
    if (this.#producer) return this.#producer;
    const replacing = this.#knowsLast;
    if (replacing) this.#check((await this.#read(false))?.token ?? null, false);
    const p = this.#kafka.producer(this.#config);
    const abandoned = this.#abandoned;
    this.#starting.add(p);
    // The start that waited for it was abandoned meanwhile: a later one makes its own. Checked
    // before the InitProducerId too: a producer whose connect came through after the thaw would
    // otherwise bump the epoch and could fence the next start's producer (exit 75).
    const abandonedMeanwhile = () => {
      if (this.#abandoned !== abandoned) throw new Error('the sink start was abandoned');
    };
    try {
      await p.connect();
      abandonedMeanwhile();
      // kafkajs initializes the transactional producer id at its first transaction: begin one and
      // end it empty (no EndTxn is sent for a transaction with no partitions).
      const t = await p.transaction();
      await t.abort();
      if (replacing) await this.#settle((await this.#read(true))?.token ?? null);
      abandonedMeanwhile();
    } catch (e) {
      await p.disconnect().catch(() => {});
      // An abandoned start's late error (fenced by the next start's producer) is not this relay's fencing.
      throw this.#abandoned !== abandoned ? e : this.#fencedOr(e);
    } finally {
      this.#starting.delete(p);
    }
    this.#producer = p;
    return p;
  }

  /**
   * The latest committed record. Reading is never an event's failure: a missing progress topic
   * is recreated (null: no record), any other error is transient.
   * `whole`: after every transaction written to the topic so far is decided (readLatestProgress):
   * the record a decision rests on. Without it, the latest record visible now, which can be an
   * older one of this relay's (its newest commit's markers not written yet, or another relay's
   * transaction open on the topic).
   */
  async #read(whole: boolean): Promise<KafkaProgress | null> {
    try {
      const latest = await readLatestProgress(
        this.#kafka,
        this.#c.progressTopic,
        this.#c.transactionalId,
        whole
          ? {
              timeoutMs: this.#c.transactionTimeoutMs,
              onWait: (stable, end) =>
                this.#log.info(
                  { topic: this.#c.progressTopic, stable, end },
                  "exactly-once: the progress topic has undecided transactions (commit markers not written yet, or another producer's transaction open); waiting for them before reading the slot's progress record",
                ),
            }
          : undefined,
      );
      if (whole && this.#stillOpen?.topic === this.#c.progressTopic) this.#openEnded();
      return latest;
    } catch (e) {
      if (e instanceof OpenTransactionError) this.#openTransaction(e);
      if (await this.#progressTopicLost()) return null;
      // No cause: its Kafka error type would make the refusal look like an event's.
      throw new Error(`cannot read the progress topic ${this.#c.progressTopic}: ${errorMessage(e)}`);
    }
  }

  /**
   * A whole read gave up on a transaction open on the progress topic. The same one (same partition,
   * same start offset) found by the next read as well has stayed open past this relay's transaction
   * timeout twice: most likely a hanging transaction, one its coordinator no longer knows (seen
   * after a broker's kill -9), which never ends by itself. Until an operator aborts it, this relay
   * cannot read its progress, so it publishes nothing: said once at error level, with the command.
   */
  #openEnded(): void {
    const o = this.#stillOpen;
    if (!o) return;
    if (o.reported)
      this.#log.info(
        { topic: o.topic, partition: o.partition, startOffset: o.startOffset },
        o.topic === this.#c.progressTopic
          ? 'exactly-once: the transaction that held the progress topic open has ended'
          : 'exactly-once: the transaction that held the event topic open has ended',
      );
    this.#stillOpen = null;
  }

  #openTransaction(e: OpenTransactionError): void {
    const now = performance.now();
    const o = this.#stillOpen;
    if (!o || o.topic !== e.topic || o.partition !== e.partition || o.startOffset !== e.startOffset) {
      this.#stillOpen = {
        topic: e.topic,
        partition: e.partition,
        startOffset: e.startOffset,
        since: now - e.waitedMs,
        reported: false,
      };
      return;
    }
    if (o.reported) return;
    o.reported = true;
    const seconds = Math.round((now - o.since) / 1000);
    this.#log.error(
      {
        topic: e.topic,
        partition: e.partition,
        startOffset: e.startOffset,
        end: e.end,
        openSeconds: seconds,
      },
      `exactly-once: a transaction has stayed open on the ${e.topic === this.#c.progressTopic ? 'progress' : 'event'} topic ${e.topic} partition ${e.partition} at offset ${e.startOffset} for ${seconds} s, past this relay's transaction timeout (${this.#c.transactionTimeoutMs} ms) twice: most likely a hanging transaction (its coordinator no longer knows it, so it never ends). ` +
        (e.topic === this.#c.progressTopic
          ? 'This relay cannot read its progress and publishes nothing until it ends. '
          : 'The events of the transaction whose commit answer this relay lost are behind it: it cannot tell whether that transaction committed and publishes nothing until it ends. ') +
        `Unless another producer writes to this topic with a longer transaction timeout, abort it: ` +
        `kafka-transactions.sh --bootstrap-server <broker> abort --topic ${e.topic} --partition ${e.partition} --start-offset ${e.startOffset} (docs/operations.md#hanging-transaction)`,
    );
  }

  /**
   * Compares the latest committed progress token with what this relay knows: its last commit, or
   * the transaction of unknown outcome (then resolved when `final`: read whole, after fencing).
   * Anything else, once this relay committed or read a record, fences it.
   *
   * Not `final` (before the replacement's InitProducerId): the read may lag — this relay's newest
   * commit not visible yet — so only a token this relay neither wrote nor read fences it there.
   */
  #check(token: string | null, final: boolean): void {
    const u = this.#unresolved;
    if (!final) {
      if (this.#knowsLast && token !== null && !this.#known(token)) throw this.#foreignRecord(token);
      return;
    }
    if (u && token === u.token) {
      this.#committedAfterAll(u, token);
      this.#log.info({ token }, 'the transaction of unknown outcome committed');
      return;
    }
    if (this.#knowsLast && token !== this.#lastToken) {
      if (token === null || !this.#own(token)) throw this.#foreignRecord(token);
      this.#wentBack(token);
    }
    if (u) this.#log.info({ token: u.token }, 'the transaction of unknown outcome did not commit');
    this.#unresolved = null;
    this.#lastToken = token;
    this.#knowsLast = true;
    if (token !== null && !this.#own(token)) this.#readTokens.add(token);
  }

  /**
   * #check after a whole read, when the progress record says that a transaction of unknown outcome
   * did not commit: its data is asked first. Kafka commits a transaction's records on every
   * partition together, so the two agree — unless a marker went missing on one partition and that
   * "hanging" transaction was aborted there by hand (docs/operations.md#hanging-transaction: after
   * a broker's kill -9, the commit marker of the progress topic's part can be missing, and
   * `kafka-transactions.sh abort` then turns a committed transaction's progress record into an
   * aborted one while its events stay committed). Taking the progress record's word then would send
   * those events again: duplicates for a read_committed consumer. The record at the transaction's
   * first event offset decides instead; its ids join `pending`, so the next progress record and
   * PostgreSQL's record hold them.
   */
  async #settle(token: string | null): Promise<void> {
    const u = this.#unresolved;
    const older = !this.#knowsLast || token === this.#lastToken || (token !== null && this.#own(token));
    if (!u?.probe || token === u.token || !older || !(await this.#dataCommitted(u.probe))) {
      this.#check(token, true);
      return;
    }
    if (this.#knowsLast && token !== this.#lastToken) this.#wentBack(token!);
    this.#committedAfterAll(u, token);
    if (token !== null && !this.#own(token)) this.#readTokens.add(token);
    this.#log.warn(
      { token: u.token, probe: u.probe, progressTopic: this.#c.progressTopic },
      "exactly-once: the transaction of unknown outcome committed its events, but its progress record is not committed (Kafka's transaction markers disagree: a hanging transaction on the progress topic aborted by hand?); taken as committed: its events are not sent again",
    );
  }

  /** The transaction of unknown outcome committed: its ids are Kafka's; `token` is the latest record read. */
  #committedAfterAll(u: Unresolved, token: string | null): void {
    for (const id of u.ids) this.#pending.add(id);
    this.#unresolved = null;
    this.#committedUnknown = u;
    this.#lastToken = token;
    this.#knowsLast = true;
    this.commits++;
  }

  /**
   * The whole read found an older record of this process's own, not its last commit's: a newer
   * record's commit marker went missing and that part was aborted by hand (#settle). Not another
   * relay's write, so not a fencing: every id the lost records held that PostgreSQL has not
   * recorded yet is still in `pending`, which committed() adds to what it returns.
   */
  #wentBack(token: string): void {
    this.#log.warn(
      { token, last: this.#lastToken, pending: this.#pending.size },
      "exactly-once: Kafka's latest committed progress record is an older one of this relay's (a newer one's commit marker went missing and it was aborted by hand?); the ids it leaves out are still held here and recorded from them",
    );
  }

  /**
   * Whether the record at `p` is committed (the data's own word). A record the log no longer has
   * (its topic deleted or recreated, retention) cannot tell: the progress record's word stands,
   * rather than every stream start failing on it (a wedge).
   */
  async #dataCommitted(p: Probe): Promise<boolean> {
    let log: TopicLog | null = null;
    try {
      log = await TopicLog.open(this.#kafka, p.topic);
      const committed = log.partitions.some((x) => x.partitionId === p.partition)
        ? await log.isCommitted(p.partition, p.offset, this.#c.transactionTimeoutMs)
        : null;
      if (this.#stillOpen?.topic === p.topic) this.#openEnded();
      if (committed === null)
        this.#log.warn(
          { probe: p },
          "exactly-once: the first event record of the transaction of unknown outcome is no longer in Kafka (its topic deleted or recreated, or retention): the progress record's word stands",
        );
      return committed === true;
    } catch (e) {
      // A hanging transaction on the event partition: named at error level the second time.
      if (e instanceof OpenTransactionError) this.#openTransaction(e);
      if (classifyKafkaError(e).reason === 'UNKNOWN_TOPIC_OR_PARTITION') {
        this.#log.warn(
          { probe: p, err: errorMessage(e) },
          "exactly-once: the topic of the transaction of unknown outcome's first event is gone: the progress record's word stands",
        );
        return false;
      }
      throw new Error(
        `cannot tell whether the Kafka transaction of unknown outcome committed (its first event: ${p.topic} partition ${p.partition} offset ${p.offset}): ${errorMessage(e)}`,
      );
    } finally {
      await log?.close();
    }
  }

  #foreignRecord(token: string | null): RelayError {
    return this.#fence(
      `the slot's Kafka progress record was written by another producer (token ${token}, this relay's last ${this.#lastToken}): another relay publishes for this slot`,
    );
  }

  /** A token of this process's transactions. */
  #own(token: string): boolean {
    return token.startsWith(`${this.#instance}:`);
  }

  /** A token this relay wrote, or read as the last one (another process's, before its own commits). */
  #known(token: string): boolean {
    return token === this.#lastToken || this.#own(token) || this.#readTokens.has(token);
  }

  /** Drops the producer after an error inside a transaction (see the class comment). */
  async #drop(): Promise<void> {
    const p = this.#producer;
    this.#producer = null;
    if (!p) return;
    this.replacements++;
    await p.disconnect().catch(() => {});
  }

  #fencedOr(e: unknown): unknown {
    if (!isFenced(e)) return e;
    return this.#fence(`the Kafka transactional producer was fenced: ${errorMessage(e)}`, e);
  }

  #fence(message: string, cause?: unknown): RelayError {
    this.#fenced ??= new RelayError(ErrorCode.PRODUCER_FENCED, message, {
      retriable: false,
      cause,
      details: { transactionalId: this.#c.transactionalId },
    });
    this.#log.error({ err: message }, 'fenced: this relay stops publishing');
    return this.#fenced;
  }

  /**
   * The latest committed progress record, read after fencing every older producer (a relay's
   * start, each stream session's start). A record this relay did not write since its last commit
   * fences it (someone else published meanwhile).
   */
  async committed(): Promise<KafkaProgress | null> {
    await this.#ready();
    const latest = await this.#read(true);
    await this.#settle(latest?.token ?? null);
    if (this.#pending.size === 0) return latest;
    // Ids Kafka holds that its latest record may leave out (a transaction of unknown outcome
    // found committed by its data, #settle): the caller records the union in PostgreSQL.
    const pending = idRanges([...this.#pending]).slice(1, -1);
    const recorded = latest?.published.slice(1, -1) ?? '';
    return {
      v: 1,
      id: this.#c.transactionalId,
      token: latest?.token ?? '',
      ...latest,
      published: `{${recorded === '' ? pending : `${recorded},${pending}`}}`,
    };
  }

  /** The database timeline of the ids from now on; a change forgets the pending ones (another timeline's). */
  setTimeline(key: string): void {
    if (this.#timeline !== null && this.#timeline !== key) this.#pending.clear();
    this.#timeline = key;
  }

  /** Ids PostgreSQL's progress record now holds ('all': every id committed so far). */
  recorded(ids: readonly string[] | 'all'): void {
    if (ids === 'all') this.#pending.clear();
    else if (this.#pending.size > 0) for (const id of ids) this.#pending.delete(id);
  }

  /**
   * One transaction: the batch (`requests`: its produce requests, in stream order) and the
   * progress record; resolves once Kafka committed it.
   * `progress`: the batch's outbox ids join the progress record from now on (the stream's
   * batches; not the sweeper's retries and dead letters, which PostgreSQL's record covers).
   */
  async publish(
    batch: readonly { event: { id: string } }[],
    requests: { topic: string; messages: Message[] }[][],
    progress: boolean,
    send: { timeout: number; compression: CompressionTypes },
    ledger: PartitionLedger,
  ): Promise<void> {
    // After a lost commit answer the producer was dropped: #ready resolves the outcome first.
    const u = this.#unresolved;
    await this.#ready();
    if (u && this.#committedUnknown === u && u.key === batchKey(batch)) return;
    // A stream batch sent again after a part of it committed (a transaction cut by time, below,
    // then a failure): what Kafka holds is not sent again.
    if (progress && this.#pending.size > 0 && batch.some((m) => this.#pending.has(m.event.id)))
      requests = requests
        .map((r) =>
          r
            .map((t) => ({ topic: t.topic, messages: t.messages.filter((m) => !this.#pending.has(idOf(m))) }))
            .filter((t) => t.messages.length > 0),
        )
        .filter((r) => r.length > 0);
    for (let i = 0; i < requests.length; )
      i = await this.#transaction(requests, i, progress, send, ledger, i === 0 ? batch : null);
  }

  /**
   * One Kafka transaction: requests[from…] one after another (each partition's order kept), then
   * the progress record (with the last request), then the commit. Returns where it stopped: at
   * the end, or earlier once the transaction is a third of --kafka-transaction-timeout-ms old —
   * a slow broker must not let the coordinator abort it (which fences the producer: the relay
   * would exit 75); the rest goes in the next transaction. `progress`: the requests' event ids
   * join the progress record (stream batches). `whole`: the batch, when this transaction is all
   * of it (a lost commit answer is then recognized on its retry by the batch's ids).
   */
  async #transaction(
    requests: { topic: string; messages: Message[] }[][],
    from: number,
    progress: boolean,
    send: { timeout: number; compression: CompressionTypes },
    ledger: PartitionLedger,
    whole: readonly { event: { id: string } }[] | null,
  ): Promise<number> {
    const producer = await this.#ready();
    const token = `${this.#instance}:${++this.#seq}`;
    const ids: string[] = [];
    const record = (): { topic: string; messages: Message[] } => ({
      topic: this.#c.progressTopic,
      messages: [
        {
          key: this.#c.transactionalId,
          value: encodeProgress({
            v: 1,
            id: this.#c.transactionalId,
            published: idRanges(this.#pending.size === 0 ? ids : [...this.#pending, ...ids]),
            token,
            ...(this.#timeline === null ? {} : { timeline: this.#timeline }),
          }),
        },
      ],
    });
    let txn: Transaction;
    try {
      txn = await producer.transaction();
    } catch (e) {
      await this.#drop();
      throw this.#fencedOr(e);
    }
    const started = performance.now();
    const budget = this.#c.transactionTimeoutMs / 3;
    let to = from;
    let probe: Probe | null = null;
    try {
      for (;;) {
        const topicMessages = requests[to]!;
        if (progress) for (const t of topicMessages) for (const m of t.messages) ids.push(idOf(m));
        to++;
        const last = to === requests.length || performance.now() - started > budget;
        const responses = await this.#send(
          txn,
          last ? [...topicMessages, record()] : topicMessages,
          send,
          ledger,
        );
        probe ??= this.#probeOf(responses);
        if (last) break;
      }
    } catch (e) {
      // Nothing was committed: the next producer's InitProducerId aborts what was stored.
      await this.#drop();
      const fenced = this.#fencedOr(e);
      if (fenced === e && classifyKafkaError(e).class === 'permanent' && (await this.#progressTopicLost()))
        throw new Error(
          `the progress topic ${this.#c.progressTopic} was deleted; recreated, the batch is sent again`,
        );
      throw fenced;
    }
    if (to < requests.length)
      this.#log.warn(
        { sent: to - from, left: requests.length - to, ms: Math.round(performance.now() - started) },
        'a Kafka transaction is committed before the rest of its batch: sending took a third of --kafka-transaction-timeout-ms; the rest goes in the next transaction',
      );
    try {
      await txn.commit();
    } catch (e) {
      await this.#drop();
      const fenced = this.#fencedOr(e);
      if (fenced !== e) throw fenced;
      // EndTxn sent, answer lost: committed or not, only the progress record (and, when it says
      // not, the events themselves: #settle) can tell.
      this.#unresolved = { token, key: whole && to === requests.length ? batchKey(whole) : '', ids, probe };
      this.#log.warn(
        { err: errorMessage(e), token },
        'the commit of a Kafka transaction failed; its outcome is read back from the progress topic before anything else is sent',
      );
      await this.#ready();
      if (this.#committedUnknown?.token === token) return to;
      throw e;
    }
    this.commits++;
    this.#lastToken = token;
    this.#knowsLast = true;
    for (const id of ids) this.#pending.add(id);
    return to;
  }

  async #send(
    txn: Transaction,
    topicMessages: { topic: string; messages: Message[] }[],
    send: { timeout: number; compression: CompressionTypes },
    ledger: PartitionLedger,
  ): Promise<RecordMetadata[]> {
    ledger.begin();
    const responses = await txn.sendBatch({
      acks: -1,
      timeout: send.timeout,
      compression: send.compression,
      topicMessages,
    });
    const missing = ledger.unacknowledged(responses);
    if (missing.length > 0) throw new UnacknowledgedPartitionsError(missing);
    return responses;
  }

  /** The first event record an answer places (not the progress record). */
  #probeOf(responses: readonly RecordMetadata[]): Probe | null {
    for (const r of responses) {
      const offset = Number(r.baseOffset);
      if (r.topicName !== this.#c.progressTopic && r.errorCode === 0 && offset >= 0)
        return { topic: r.topicName, partition: r.partition, offset };
    }
    return null;
  }

  async #ensureTopic(): Promise<void> {
    const admin = this.#kafka.admin();
    this.#starting.add(admin);
    try {
      await admin.connect();
      const topics = await admin.listTopics();
      if (topics.includes(this.#c.progressTopic)) {
        this.#log.debug({ topic: this.#c.progressTopic }, 'the exactly-once progress topic exists');
        return;
      }
      await admin
        .createTopics({
          waitForLeaders: true,
          topics: [
            {
              topic: this.#c.progressTopic,
              numPartitions: 1,
              configEntries: [
                { name: 'cleanup.policy', value: 'compact' },
                { name: 'segment.ms', value: '600000' },
              ],
            },
          ],
        })
        .catch((e: unknown) => {
          if ((e as { type?: string }).type !== 'TOPIC_ALREADY_EXISTS') throw e;
        });
      this.#log.info({ topic: this.#c.progressTopic }, 'created the exactly-once progress topic');
    } finally {
      this.#starting.delete(admin);
      await admin.disconnect().catch(() => {});
    }
  }

  /**
   * The sink's start was abandoned (--sink-start-timeout-ms): the clients it may hang on (the
   * producer being made ready, the admin of the progress topic) are disconnected, and a
   * producer whose InitProducerId still comes through is not kept.
   */
  abandonStart(): void {
    this.#abandoned++;
    for (const c of this.#starting) void c.disconnect().catch(() => {});
    this.#starting.clear();
  }

  /**
   * Creates the progress topic if missing (compacted, one partition) and fences every older
   * producer of the transactional id.
   */
  async start(): Promise<void> {
    await this.#ensureTopic();
    await this.#ready();
    this.#log.info(
      { instance: this.#instance, progressTopic: this.#c.progressTopic },
      'exactly-once: transactional producer ready (every older producer of this transactional id is fenced)',
    );
  }

  /**
   * A permanent refusal may be the progress topic's: deleted under the relay. It is then
   * recreated, and the refusal is transient for the batch. The record's history is gone: the
   * next record carries every id PostgreSQL has not recorded yet (pending), so this process
   * loses nothing of the guarantee; a relay that restarts before PostgreSQL recorded them reads
   * no Kafka record and sends those events again (the at-least-once window, logged at start).
   * The next token is not compared with the last (it cannot be found any more).
   */
  async #progressTopicLost(): Promise<boolean> {
    const admin = this.#kafka.admin();
    try {
      await admin.connect();
      const md = await admin.fetchTopicMetadata({ topics: [this.#c.progressTopic] });
      if (md.topics.some((t) => t.name === this.#c.progressTopic && t.partitions.length > 0)) return false;
    } catch (e) {
      if ((e as { type?: string }).type !== 'UNKNOWN_TOPIC_OR_PARTITION') return false;
    } finally {
      await admin.disconnect().catch(() => {});
    }
    this.#log.error(
      { topic: this.#c.progressTopic },
      'the exactly-once progress topic was deleted: recreating it; until PostgreSQL records the events committed so far, a restart would send them again (at-least-once)',
    );
    await this.#ensureTopic();
    this.#knowsLast = false;
    this.#lastToken = null;
    this.progressTopicLosses++;
    return true;
  }

  async stop(): Promise<void> {
    await this.#producer?.disconnect().catch(() => {});
    this.#producer = null;
  }
}
