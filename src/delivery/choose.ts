import type { Config } from '../config/load.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import type { Sink } from '../sinks/sink.ts';
import { AtLeastOnce } from './at-least-once.ts';
import { ExactlyOnce } from './exactly-once.ts';
import type { DeliveryMode, TimelineObserver } from './mode.ts';

/** The delivery mode, chosen once at start: exactly-once when the sink runs Kafka transactions. */
export function deliveryModeOf(
  config: Config,
  sink: Sink,
  log: Logger,
  metrics: RelayMetrics,
  timelines: TimelineObserver,
): DeliveryMode {
  const eo = sink.exactlyOnce;
  return eo ? new ExactlyOnce(eo, config, log, metrics, timelines) : new AtLeastOnce(config);
}
