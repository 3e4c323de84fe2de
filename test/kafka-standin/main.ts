// Standalone stand-in for pointing a relay at by hand:
//   node test/kafka-standin/main.ts --port 9092 [--auto-create-topics] [--partitions N]
//     [--max-message-bytes N] [--topic name[:partitions]]... [--verbose]
// Prints `listening 127.0.0.1:<port>` once ready; stops on SIGTERM/SIGINT.
import { parseArgs } from 'node:util';
import { KafkaStandIn } from './index.ts';

function nonNegativeInt(
  name: string,
  raw: string | undefined,
  fallback: number | undefined,
): number | undefined {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`--${name} needs a non-negative integer, got "${raw}"`);
    process.exit(2);
  }
  return n;
}

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '9092' },
    'auto-create-topics': { type: 'boolean', default: false },
    partitions: { type: 'string' },
    'max-message-bytes': { type: 'string' },
    topic: { type: 'string', multiple: true, default: [] },
    verbose: { type: 'boolean', default: false },
  },
  strict: true,
});

const broker = await KafkaStandIn.start({
  port: nonNegativeInt('port', values.port, 9092),
  autoCreateTopics: values['auto-create-topics'],
  defaultPartitions: nonNegativeInt('partitions', values.partitions, undefined),
  maxMessageBytes: nonNegativeInt('max-message-bytes', values['max-message-bytes'], undefined),
  log: values.verbose ? (line) => console.error(line) : undefined,
});
for (const spec of values.topic) {
  const [name = '', count] = spec.split(':');
  broker.createTopic(name, { partitions: nonNegativeInt('topic', count, undefined) });
}
console.log(`listening ${broker.brokers[0]}`);

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  const s = broker.stats();
  console.error(`${signal}: stopping (${s.storedRecords} records in ${s.topics} topics)`);
  await broker.stop();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
