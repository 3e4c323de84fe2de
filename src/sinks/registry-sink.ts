import type { Config } from '../config/load.ts';
import type { Classified } from '../errors.ts';
import type { OutboundMessage } from '../route/event.ts';
import { valueFormatFor } from '../route/value-format.ts';
import { envelopeSchema } from '../schema-registry/envelope-schema.ts';
import { RegistryClient, RegistryError } from '../schema-registry/registry-client.ts';
import { type SubjectStrategy, subjectFor } from '../schema-registry/subject.ts';
import { frame, frameHeader } from '../schema-registry/wire-format.ts';
import type { ExactlyOnceProgress, PublishOptions, Sink } from './sink.ts';

export type SchemaRegistryConfig = Pick<
  Config,
  | 'schemaRegistryUrl'
  | 'schemaRegistryUsername'
  | 'schemaRegistryPassword'
  | 'schemaRegistrySubjectStrategy'
  | 'schemaRegistryAutoRegister'
  | 'valueFormat'
  | 'valueFormatOverrides'
>;

/**
 * Frames the envelope-protobuf values of a batch in the Confluent wire format before the inner
 * sink publishes it (src/schema-registry/wire-format.ts); other values pass as they are. Only
 * present when --schema-registry-url is set: the default path does not go through it.
 *
 * The schema id of each subject is asked once (registering the envelope's schema, or looking it up)
 * and its header kept for the life of the process; a failed answer is not kept, so the next publish
 * asks again. A registry error rejects the whole publish before anything is sent: an outage is
 * transient (the stream retries, nothing advances); an incompatible or missing schema is permanent,
 * and the stream, sending the events one at a time, fails exactly those of that subject — the
 * others flow.
 */
export class SchemaRegistrySink implements Sink {
  readonly name: string;
  readonly abandonStart?: () => void;
  /** The sink that publishes the framed batches. */
  readonly inner: Sink;
  readonly #client: RegistryClient;
  readonly #strategy: SubjectStrategy;
  readonly #register: boolean;
  readonly #c: SchemaRegistryConfig;
  readonly #headers = new Map<string, Buffer>();

  constructor(inner: Sink, c: SchemaRegistryConfig) {
    this.inner = inner;
    this.name = inner.name;
    // Only where the inner sink has one (the relay's message says whether clients were dropped).
    if (inner.abandonStart) this.abandonStart = () => inner.abandonStart?.();
    this.#c = c;
    this.#client = new RegistryClient({
      url: c.schemaRegistryUrl ?? '',
      username: c.schemaRegistryUsername,
      password: c.schemaRegistryPassword,
    });
    this.#strategy = c.schemaRegistrySubjectStrategy;
    this.#register = c.schemaRegistryAutoRegister;
  }

  /** Registry requests sent so far (tests: ids are cached per subject). */
  get registryRequests(): number {
    return this.#client.requests;
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  get exactlyOnce(): ExactlyOnceProgress | undefined {
    return this.inner.exactlyOnce;
  }

  async publish(batch: readonly OutboundMessage[], opts?: PublishOptions): Promise<void> {
    let out: OutboundMessage[] | null = null;
    for (let i = 0; i < batch.length; i++) {
      const m = batch[i]!;
      if (m.value === null) continue;
      const format = valueFormatFor(m.event.aggregateType, this.#c.valueFormat, this.#c.valueFormatOverrides);
      if (format !== 'envelope-protobuf') continue;
      const schema = envelopeSchema();
      const subject = subjectFor(this.#strategy, m.topic, schema.recordName);
      let header = this.#headers.get(subject);
      if (!header) {
        header = frameHeader(await this.#client.idOf(subject, schema, this.#register), schema.messageIndexes);
        this.#headers.set(subject, header);
      }
      out ??= batch.slice();
      out[i] = { ...m, value: frame(header, m.value) };
    }
    return this.inner.publish(out ?? batch, opts);
  }

  classify(e: unknown): Classified {
    if (e instanceof RegistryError)
      return { class: e.permanent ? 'permanent' : 'transient', reason: e.reason, message: e.message };
    return this.inner.classify(e);
  }

  destinationOf(m: OutboundMessage): string {
    return this.inner.destinationOf?.(m) ?? m.topic;
  }

  stop(): Promise<void> {
    return this.inner.stop();
  }
}
