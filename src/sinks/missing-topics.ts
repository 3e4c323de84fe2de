/**
 * Topics the broker said do not exist, remembered so that the next events for them fail after
 * one metadata request instead of kafkajs' metadata retries (~1.4 s). The sink publishes one
 * batch at a time, so without this every refused event — the stream's first attempt and each of
 * the sweeper's retries — held the whole stream for those 1.4 s: at 0.1 % of events for a missing
 * topic and 2,000 events/s the relay fell behind (docs/benchmarks.md, "Refused events").
 *
 * A remembered topic is asked about before each send that includes it (`probe`: one metadata
 * request, no retries):
 * - still missing: the send is refused at once (UNKNOWN_TOPIC_OR_PARTITION, permanent — the
 *   broker answered, so the event's attempt counts as it would have);
 * - it exists now: it is forgotten and the send goes on;
 * - no answer (the brokers are unreachable) or any other answer: the send goes on as if nothing
 *   were remembered, so a broker outage stays a transient error and burns no attempt.
 * Only single-topic refusals are remembered, and only once a probe of its own says missing: a
 * refusal of a batch for several topics does not say which one is missing (the stream re-sends
 * such a batch per topic, src/outcome/decide.ts), and in exactly-once mode the refusal may be
 * the progress topic's.
 */
export type TopicProbe = (topic: string) => Promise<'ok' | 'missing' | 'unauthorized' | 'unreachable'>;

export class MissingTopics {
  /** topic → when it was first found missing (ms since the epoch). */
  readonly #topics = new Map<string, number>();
  readonly #probe: TopicProbe;
  /** Sends refused after a probe alone, without kafkajs' retries (tests, logs). */
  refusedFast = 0;

  constructor(probe: TopicProbe) {
    this.#probe = probe;
  }

  get size(): number {
    return this.#topics.size;
  }

  has(topic: string): boolean {
    return this.#topics.has(topic);
  }

  /**
   * The refusal for the first remembered topic among `topics` that a probe finds still missing;
   * null when none is (remembered topics found to exist are forgotten on the way).
   */
  async refusal(topics: readonly string[]): Promise<Error | null> {
    if (this.#topics.size === 0) return null;
    for (const topic of topics) {
      const since = this.#topics.get(topic);
      if (since === undefined) continue;
      const verdict = await this.#probe(topic).catch(() => 'unreachable' as const);
      if (verdict === 'ok') this.#topics.delete(topic);
      if (verdict !== 'missing') continue;
      this.refusedFast++;
      return Object.assign(
        new Error(
          `This server does not host this topic-partition: ${topic} (missing since ${new Date(since).toISOString()})`,
        ),
        { name: 'KafkaJSProtocolError', type: 'UNKNOWN_TOPIC_OR_PARTITION', code: 3, retriable: false },
      );
    }
    return null;
  }

  /**
   * After a send to `topic` alone was refused with UNKNOWN_TOPIC_OR_PARTITION: remembered if a
   * probe confirms it is missing. Whether it is remembered now.
   */
  async confirm(topic: string): Promise<boolean> {
    if (this.#topics.has(topic)) return true;
    if ((await this.#probe(topic).catch(() => 'unreachable' as const)) !== 'missing') return false;
    this.#topics.set(topic, Date.now());
    return true;
  }
}
