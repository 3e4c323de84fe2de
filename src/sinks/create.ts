import type { Config } from '../config/load.ts';
import { ErrorCode, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { KafkaSink } from './kafka.ts';
import { NatsSink } from './nats/nats-sink.ts';
import type { Sink } from './sink.ts';
import { StdoutSink } from './stdout.ts';

export function createSink(c: Config, log: Logger): Sink {
  switch (c.sink) {
    case 'stdout':
      return new StdoutSink();
    case 'nats':
      return new NatsSink(c, log);
    case 'rabbitmq':
      throw new RelayError(ErrorCode.CONFIG_INVALID, '--sink rabbitmq: not built yet (issue 23)');
    default:
      return new KafkaSink(c, log);
  }
}
