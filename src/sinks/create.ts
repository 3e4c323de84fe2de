import type { Config } from '../config/load.ts';
import type { Logger } from '../observability/logger.ts';
import { SchemaRegistrySink } from '../schema-registry/registry-sink.ts';
import { KafkaSink } from './kafka.ts';
import type { Sink } from './sink.ts';
import { StdoutSink } from './stdout.ts';

export function createSink(c: Config, log: Logger): Sink {
  const sink = c.sink === 'stdout' ? new StdoutSink() : new KafkaSink(c, log);
  return c.schemaRegistryUrl ? new SchemaRegistrySink(sink, c) : sink;
}
