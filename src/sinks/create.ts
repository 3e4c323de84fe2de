import type { Config } from '../config/load.ts';
import type { Logger } from '../observability/logger.ts';
import { KafkaSink } from './kafka/kafka-sink.ts';
import type { Sink } from './sink.ts';
import { StdoutSink } from './stdout.ts';

/**
 * The configured sink. Each broker sink other than Kafka (the default, which `check` uses too) is
 * a module loaded only when chosen: their client libraries (the AWS SDK, ioredis, undici,
 * amqplib, nats.js) held ~17 MB of RSS in every relay that never used them (issue 39, a relay's
 * peak RSS through one 200,000-row transaction; docs/benchmarks.md). So is the schema registry's
 * wrapper, which brings protobuf-es.
 */
export async function createSink(c: Config, log: Logger): Promise<Sink> {
  const sink = await brokerSink(c, log);
  if (!c.schemaRegistryUrl) return sink;
  const { SchemaRegistrySink } = await import('./registry-sink.ts');
  return new SchemaRegistrySink(sink, c);
}

async function brokerSink(c: Config, log: Logger): Promise<Sink> {
  switch (c.sink) {
    case 'stdout':
      return new StdoutSink();
    case 'nats': {
      const { NatsSink } = await import('./nats/nats-sink.ts');
      return new NatsSink(c, log);
    }
    case 'rabbitmq': {
      const { RabbitMqSink } = await import('./rabbitmq/rabbitmq-sink.ts');
      return new RabbitMqSink(c, log);
    }
    case 'sqs': {
      const { SqsSink } = await import('./sqs/sqs-sink.ts');
      return new SqsSink(c, log);
    }
    case 'http': {
      const { HttpSink } = await import('./http/http-sink.ts');
      return new HttpSink(c, log);
    }
    case 'redis': {
      const { RedisSink } = await import('./redis/redis-sink.ts');
      return new RedisSink(c, log);
    }
    default:
      return new KafkaSink(c, log);
  }
}
