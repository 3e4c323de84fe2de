import { readFileSync } from 'node:fs';
import { CompressionTypes, Kafka, logLevel, type Message, type Producer, type SASLOptions } from 'kafkajs';
import type { Config } from '../config/load.ts';
import type { Logger } from '../observability/logger.ts';
import type { OutboundMessage } from '../route/event.ts';
import { type Classified, classifyKafkaError } from './kafka-errors.ts';
import type { Sink } from './sink.ts';

export type KafkaSinkConfig = Pick<
  Config,
  | 'kafkaBrokers'
  | 'kafkaClientId'
  | 'kafkaSsl'
  | 'kafkaSslCaFile'
  | 'kafkaSslCertFile'
  | 'kafkaSslKeyFile'
  | 'kafkaSaslMechanism'
  | 'kafkaSaslUsername'
  | 'kafkaSaslPassword'
  | 'kafkaCompression'
  | 'kafkaAutoCreateTopics'
  | 'kafkaRequestTimeoutMs'
>;

function ssl(c: KafkaSinkConfig) {
  if (!c.kafkaSsl && !c.kafkaSslCaFile && !c.kafkaSslCertFile) return undefined;
  if (!c.kafkaSslCaFile && !c.kafkaSslCertFile) return true;
  return {
    ca: c.kafkaSslCaFile ? [readFileSync(c.kafkaSslCaFile, 'utf8')] : undefined,
    cert: c.kafkaSslCertFile ? readFileSync(c.kafkaSslCertFile, 'utf8') : undefined,
    key: c.kafkaSslKeyFile ? readFileSync(c.kafkaSslKeyFile, 'utf8') : undefined,
  };
}

function sasl(c: KafkaSinkConfig): SASLOptions | undefined {
  if (c.kafkaSaslMechanism === 'none') return undefined;
  return {
    mechanism: c.kafkaSaslMechanism,
    username: c.kafkaSaslUsername ?? '',
    password: c.kafkaSaslPassword ?? '',
  } as SASLOptions;
}

/** kafkajs log levels → pino; kafkajs is chatty at info, so only warnings and errors pass. */
function logCreator(log: Logger) {
  return () =>
    ({ level, log: entry }: { level: number; log: { message: string } & Record<string, unknown> }) => {
      const { message, timestamp: _t, logger: _l, ...rest } = entry;
      if (level === logLevel.ERROR) log.error(rest, `kafkajs: ${message}`);
      else if (level === logLevel.WARN) log.warn(rest, `kafkajs: ${message}`);
    };
}

/**
 * Kafka through kafkajs: idempotent producer, acks = all, one request in flight per
 * broker (so a retry cannot reorder a key), no topic auto-creation unless asked.
 * kafkajs's own retries are kept short: the relay's loop retries forever with back-off
 * and keeps the slot unconfirmed meanwhile.
 */
export class KafkaSink implements Sink {
  readonly name = 'kafka';
  readonly #producer: Producer;
  readonly #compression: CompressionTypes;
  readonly #timeout: number;

  constructor(c: KafkaSinkConfig, log: Logger) {
    const kafka = new Kafka({
      clientId: c.kafkaClientId,
      brokers: c.kafkaBrokers,
      ssl: ssl(c),
      sasl: sasl(c),
      connectionTimeout: 5000,
      requestTimeout: c.kafkaRequestTimeoutMs,
      retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
      logLevel: logLevel.WARN,
      logCreator: logCreator(log.child({ component: 'kafkajs' })),
    });
    this.#producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: c.kafkaAutoCreateTopics,
      retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
    });
    this.#compression = c.kafkaCompression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
    this.#timeout = c.kafkaRequestTimeoutMs;
  }

  async start(): Promise<void> {
    await this.#producer.connect();
  }

  async publish(batch: readonly OutboundMessage[]): Promise<void> {
    // Group by topic keeping stream order: order within a key (hence a partition) is preserved.
    const byTopic = new Map<string, Message[]>();
    for (const m of batch) {
      let list = byTopic.get(m.topic);
      if (!list) byTopic.set(m.topic, (list = []));
      list.push({ key: m.key, value: m.value, headers: m.headers, timestamp: String(m.timestamp) });
    }
    await this.#producer.sendBatch({
      acks: -1,
      timeout: this.#timeout,
      compression: this.#compression,
      topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
    });
  }

  classify(e: unknown): Classified {
    return classifyKafkaError(e);
  }

  async stop(): Promise<void> {
    await this.#producer.disconnect();
  }
}
