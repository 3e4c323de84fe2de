/**
 * Topics the broker said do not exist (UNKNOWN_TOPIC_OR_PARTITION once kafkajs' own metadata
 * retries were spent, ~1.4 s), remembered so that the next events for them fail at once instead
 * of waiting through the same retries. The sink publishes one batch at a time, so without this
 * every refused event — the stream's first attempt and each of the sweeper's retries — held the
 * whole stream for those 1.4 s: at 0.1 % of events for a missing topic and 2,000 events/s the
 * relay fell behind (docs/benchmarks.md, "Refused events").
 *
 * A remembered topic is probed in the background (`probe`, a metadata request without retries)
 * every `intervalMs`; once it exists it is forgotten and its events flow again. Between its
 * creation and the next probe its events still fail (permanently, with the usual reason): the
 * sweeper retries them with back-off, so nothing is lost, and in strict order they park their key
 * as any refused event does. Only single-topic refusals are remembered: a refusal of a batch for
 * several topics does not say which one is missing (the stream re-sends such a batch per topic,
 * src/outcome/decide.ts, and the per-topic send names it).
 */
export type TopicProbe = (topic: string) => Promise<'ok' | 'missing' | 'unauthorized' | 'unreachable'>;

export class MissingTopics {
  /** topic → when it was found missing (ms since the epoch). */
  readonly #topics = new Map<string, number>();
  readonly #probe: TopicProbe;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | null = null;
  #probing = false;
  /** Sends refused from memory, without a request (tests, logs). */
  refusedFromMemory = 0;

  constructor(probe: TopicProbe, intervalMs = 5000) {
    this.#probe = probe;
    this.#intervalMs = intervalMs;
  }

  get size(): number {
    return this.#topics.size;
  }

  has(topic: string): boolean {
    return this.#topics.has(topic);
  }

  /** The refusal for the first remembered topic among `topics`, or null when none is remembered. */
  refusal(topics: readonly string[]): Error | null {
    for (const topic of topics) {
      const since = this.#topics.get(topic);
      if (since === undefined) continue;
      this.refusedFromMemory++;
      return Object.assign(
        new Error(
          `This server does not host this topic-partition: ${topic} (found missing ${Math.round((Date.now() - since) / 1000)} s ago; looked for again every ${this.#intervalMs / 1000} s)`,
        ),
        { name: 'KafkaJSProtocolError', type: 'UNKNOWN_TOPIC_OR_PARTITION', code: 3, retriable: false },
      );
    }
    return null;
  }

  /** Remembers `topic` as missing (a send to it alone was refused with UNKNOWN_TOPIC_OR_PARTITION). */
  add(topic: string): void {
    if (!this.#topics.has(topic)) this.#topics.set(topic, Date.now());
    this.#timer ??= setInterval(() => void this.probeNow(), this.#intervalMs).unref();
  }

  /** Looks for every remembered topic once; those that exist now are forgotten. */
  async probeNow(): Promise<void> {
    if (this.#probing) return;
    this.#probing = true;
    try {
      for (const topic of [...this.#topics.keys()]) {
        const verdict = await this.#probe(topic).catch(() => 'unreachable' as const);
        // Only a positive answer forgets: unreachable keeps the memory (the send would fail anyway).
        if (verdict === 'ok') this.#topics.delete(topic);
      }
    } finally {
      this.#probing = false;
      if (this.#topics.size === 0) this.stop();
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
