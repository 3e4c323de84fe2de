import type { Config } from '../config/load.ts';
import type { Logger } from '../observability/logger.ts';
import { HttpSink } from './http/http-sink.ts';
import { KafkaSink } from './kafka/kafka-sink.ts';
import { NatsSink } from './nats/nats-sink.ts';
import { RabbitMqSink } from './rabbitmq/rabbitmq-sink.ts';
import { RedisSink } from './redis/redis-sink.ts';
import { SchemaRegistrySink } from './registry-sink.ts';
import type { Sink } from './sink.ts';
import { SqsSink } from './sqs/sqs-sink.ts';
import { StdoutSink } from './stdout.ts';

export function createSink(c: Config, log: Logger): Sink {
  const sink = brokerSink(c, log);
  return c.schemaRegistryUrl ? new SchemaRegistrySink(sink, c) : sink;
}

function brokerSink(c: Config, log: Logger): Sink {
  switch (c.sink) {
    case 'stdout':
      return new StdoutSink();
    case 'nats':
      return new NatsSink(c, log);
    case 'rabbitmq':
      return new RabbitMqSink(c, log);
    case 'sqs':
      return new SqsSink(c, log);
    case 'http':
      return new HttpSink(c, log);
    case 'redis':
      return new RedisSink(c, log);
    default:
      return new KafkaSink(c, log);
  }
}
