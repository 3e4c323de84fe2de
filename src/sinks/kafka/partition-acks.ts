/**
 * The relay's own acknowledgement rule at the Kafka sink's boundary, whatever client is under it:
 * a publish counts as acknowledged only when, for every (topic, partition) its messages were
 * assigned to, a Produce response for exactly that topic and partition came back with no error
 * and a base offset. A client that resolves a send without such a response for some partition
 * (kafkajs 2.2.4 did after a partition leader died: docs/architecture.md "The Kafka client")
 * gets a transient error instead, so the relay sends the batch again and confirms nothing past it.
 *
 * The assignments are recorded as the partitioner makes them (the sink wraps its partitioner),
 * so the check needs nothing from the client but its responses. Pure; unit-tested with a client
 * that silently drops a partition's response.
 */

/** A Produce response's entry for one partition (kafkajs' RecordMetadata has this shape). */
export interface PartitionAck {
  topicName: string;
  partition: number;
  errorCode: number;
  baseOffset?: string;
}

/** Whether `r` acknowledges its partition: no error and a real (non-negative) base offset. */
export function acknowledges(r: PartitionAck | undefined): boolean {
  return (
    r !== undefined && r.errorCode === 0 && typeof r.baseOffset === 'string' && /^\d+$/.test(r.baseOffset)
  );
}

/** Responses scanned per partition by the fast path of unacknowledged (see #allAcknowledged). */
const FEW = 16;

/** The (topic, partition)s one publish targets. One per sink; publishes are serialized. */
export class PartitionLedger {
  readonly #byTopic = new Map<string, Set<number>>();
  #lastTopic: string | null = null;
  #lastSet: Set<number> | null = null;

  /** Forgets the previous publish's assignments. */
  begin(): void {
    this.#byTopic.clear();
    this.#lastTopic = null;
    this.#lastSet = null;
  }

  /** Called by the partitioner for each message it assigns (per event: one comparison and a Set add). */
  record(topic: string, partition: number): void {
    let set = this.#lastSet;
    if (topic !== this.#lastTopic || set === null) {
      set = this.#byTopic.get(topic) ?? null;
      if (set === null) this.#byTopic.set(topic, (set = new Set()));
      this.#lastTopic = topic;
      this.#lastSet = set;
    }
    set.add(partition);
  }

  /** Partitions assigned so far, as `topic/partition` (sorted), for messages and tests. */
  assigned(): string[] {
    return [...this.#byTopic].flatMap(([t, ps]) => [...ps].sort((a, b) => a - b).map((p) => `${t}/${p}`));
  }

  /** The assigned `topic/partition`s that no entry of `responses` acknowledges. */
  unacknowledged(responses: readonly PartitionAck[] | undefined): string[] {
    if (responses && this.#allAcknowledged(responses)) return [];
    const acked = new Set<string>();
    for (const r of responses ?? []) if (acknowledges(r)) acked.add(`${r.topicName}/${r.partition}`);
    return this.assigned().filter((tp) => !acked.has(tp));
  }

  /**
   * The usual answer, without a string per partition: every assigned partition has an
   * acknowledging entry. A live stream asks once per commit, for one partition and one entry;
   * past FEW entries the Set of unacknowledged() is cheaper than a scan per partition.
   */
  #allAcknowledged(responses: readonly PartitionAck[]): boolean {
    if (responses.length > FEW) return false;
    for (const [topic, partitions] of this.#byTopic)
      for (const p of partitions) {
        let found = false;
        for (const r of responses)
          if (r.partition === p && r.topicName === topic && acknowledges(r)) {
            found = true;
            break;
          }
        if (!found) return false;
      }
    return true;
  }
}

/**
 * Raised by the sink when the client resolved a send without acknowledging every partition:
 * transient (nothing is recorded published, the batch is sent again; duplicates, never losses).
 */
export class UnacknowledgedPartitionsError extends Error {
  readonly partitions: string[];
  readonly retriable = true;
  constructor(partitions: string[]) {
    super(
      `the Kafka client reported the send done, but no produce response acknowledged ${partitions.join(', ')}: ` +
        'the batch is sent again and nothing past it is confirmed',
    );
    this.name = 'UnacknowledgedPartitionsError';
    this.partitions = partitions;
  }
}
