/**
 * Which topics exist, as far as the relay's sends need to know, so that an event for a missing
 * topic (auto-creation off) is refused without holding the stream. The sink publishes one batch
 * at a time, and kafkajs, sending to a topic the broker does not host, retries its metadata
 * request for ~1.4 – 3 s before it gives up: every event behind it waited that long. The soak
 * measured it twice: ~1.4 s per refused event before topics were remembered, and then still ~3 s
 * of stalled stream at each start of a relay (the first event for the missing topic), which was
 * the whole of the soak's first minute's tail and of its restart's (docs/benchmarks.md).
 *
 * - **A topic never sent to** is asked about once before its first send (`probe`: one metadata
 *   request, no retries): it exists — remembered as present, never asked about again (until a send
 *   to it is refused as missing); missing — remembered as missing and the send refused at once;
 *   no answer (brokers unreachable) or any other answer — the send goes on, kafkajs decides.
 * - **A topic remembered missing** is asked about before a send that includes it: still missing —
 *   refused; it exists now — forgotten, the send goes on; no answer — the send goes on as if
 *   nothing were remembered, so a broker outage stays a transient error. The stream's first
 *   attempt of an event does not ask again within `recheckMs` (1 s) of the last "missing": it is
 *   refused at once, without a request (0.1 % of events for a missing topic otherwise held the
 *   stream for a metadata round trip each). A topic created meanwhile is found by the next
 *   check: an event refused in between is failed and the sweeper's retry, which always asks,
 *   publishes it (strict ordering parks its aggregate until then); so does an outage: no retry's
 *   attempt is ever burnt by one.
 *
 * A refusal is UNKNOWN_TOPIC_OR_PARTITION, permanent and destination-wide, as the broker's own:
 * the broker answered, so the event's attempt counts as it would have. A batch for several topics
 * refused this way is re-sent per topic (src/outcome/decide.ts). After a send refused as missing
 * by kafkajs itself (a topic deleted after it was present) the topic is remembered only once a
 * probe of its own says missing: a refusal of a batch for several topics does not say which one is
 * missing, and in exactly-once mode the refusal may be the progress topic's.
 */
export type TopicProbe = (topic: string) => Promise<'ok' | 'missing' | 'unauthorized' | 'unreachable'>;

/** Topics remembered as present beyond this many are forgotten together (asked about again once). */
const MAX_PRESENT = 10_000;

export class MissingTopics {
  /** topic → when it was first found missing and when a probe last said so (ms since the epoch). */
  readonly #topics = new Map<string, { since: number; checkedAt: number }>();
  /** Topics a probe found or a send went to: no probe before their sends. */
  readonly #present = new Set<string>();
  readonly #probe: TopicProbe;
  readonly #recheckMs: number;
  readonly #now: () => number;
  /** Whether a topic never sent to is probed before its first send (not when the producer may create topics). */
  readonly #probeFirst: boolean;
  /** Sends refused without kafkajs' retries: by a probe, or remembered (tests, logs). */
  refusedFast = 0;
  /** Topics found missing by the probe before their first send (tests, logs). */
  foundBeforeSend = 0;

  constructor(
    probe: TopicProbe,
    opts: { recheckMs?: number; probeFirst?: boolean; now?: () => number } = {},
  ) {
    this.#probe = probe;
    this.#recheckMs = opts.recheckMs ?? 1000;
    this.#probeFirst = opts.probeFirst ?? true;
    this.#now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.#topics.size;
  }

  has(topic: string): boolean {
    return this.#topics.has(topic);
  }

  /**
   * Whether a send to `topics` needs `refusal` first: one of them is remembered missing, or is
   * one never sent to. A lookup or two per topic of the batch: nothing else on the usual path,
   * nor for the batches of other topics while one is missing.
   */
  needsCheck(topics: readonly { topic: string }[]): boolean {
    if (this.#topics.size === 0 && !this.#probeFirst) return false;
    for (let i = 0; i < topics.length; i++) {
      const t = topics[i]!.topic;
      if (this.#topics.has(t) || (this.#probeFirst && !this.#present.has(t))) return true;
    }
    return false;
  }

  /**
   * The refusal for the first of `topics` found missing (remembered, or by the probe before its
   * first send); null when none is (remembered topics found to exist are forgotten on the way).
   * `recentEnough` (the stream's first attempt): a probe's "missing" of less than `recheckMs` ago
   * stands without a new request; otherwise (the sweeper's retries) a remembered topic is asked
   * about before each send, so an outage never burns a retry's attempt.
   */
  async refusal(
    topics: readonly string[],
    recentEnough = false,
  ): Promise<(Error & { topic: string }) | null> {
    for (const topic of topics) {
      const entry = this.#topics.get(topic);
      if (entry === undefined) {
        if (!this.#probeFirst || this.#present.has(topic)) continue;
        const verdict = await this.#ask(topic);
        if (verdict === 'ok') this.#remember(topic);
        if (verdict !== 'missing') continue;
        const now = this.#now();
        this.#present.delete(topic);
        this.#topics.set(topic, { since: now, checkedAt: now });
        this.foundBeforeSend++;
        return this.#refuse(topic, now);
      }
      if (!recentEnough || this.#now() - entry.checkedAt >= this.#recheckMs) {
        const verdict = await this.#ask(topic);
        if (verdict === 'ok') {
          this.#topics.delete(topic);
          this.#remember(topic);
        }
        if (verdict !== 'missing') continue;
        entry.checkedAt = this.#now();
      }
      return this.#refuse(topic, entry.since);
    }
    return null;
  }

  /** After a send to `topics` went through: they exist (no probe before their next sends). */
  sent(topics: readonly string[]): void {
    if (this.#probeFirst) for (const t of topics) this.#remember(t);
  }

  /**
   * After a send to `topic` alone was refused with UNKNOWN_TOPIC_OR_PARTITION: remembered if a
   * probe confirms it is missing. Whether it is remembered now.
   */
  async confirm(topic: string): Promise<boolean> {
    if (this.#topics.has(topic)) return true;
    if ((await this.#ask(topic)) !== 'missing') return false;
    const now = this.#now();
    this.#present.delete(topic);
    this.#topics.set(topic, { since: now, checkedAt: now });
    return true;
  }

  #ask(topic: string): ReturnType<TopicProbe> {
    return this.#probe(topic).catch(() => 'unreachable' as const);
  }

  #remember(topic: string): void {
    if (this.#present.size >= MAX_PRESENT && !this.#present.has(topic)) this.#present.clear();
    this.#present.add(topic);
  }

  #refuse(topic: string, since: number): Error & { topic: string } {
    this.refusedFast++;
    return Object.assign(
      new Error(
        `This server does not host this topic-partition: ${topic} (missing since ${new Date(since).toISOString()})`,
      ),
      { name: 'KafkaJSProtocolError', type: 'UNKNOWN_TOPIC_OR_PARTITION', code: 3, retriable: false, topic },
    );
  }
}
