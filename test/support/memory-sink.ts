import type { OutboundMessage } from '../../src/route/event.ts';
import type { Sink } from '../../src/sinks/sink.ts';

/** An in-process sink that acknowledges every message at once and keeps them in `published`. */
export function memorySink(): Sink & { published: OutboundMessage[] } {
  const published: OutboundMessage[] = [];
  return {
    name: 'memory',
    published,
    start: async () => {},
    publish: async (batch) => {
      published.push(...batch);
    },
    classify: (e) => ({ class: 'transient', reason: 'TEST', message: String(e) }),
    stop: async () => {},
  };
}
