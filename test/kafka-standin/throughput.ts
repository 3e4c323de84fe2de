// kafkajs producer throughput into the stand-in:
//   node test/kafka-standin/throughput.ts [--messages 200000] [--batch 2000] [--value-bytes 500]
//     [--partitions 6] [--gzip] [--in-process]
// By default the stand-in runs as a separate process (main.ts), as it would for a relay benchmark;
// --in-process shares one event loop between client and broker.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CompressionTypes, Kafka, logLevel } from 'kafkajs';
import { KafkaStandIn } from './index.ts';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '200000' },
    batch: { type: 'string', default: '2000' },
    'value-bytes': { type: 'string', default: '500' },
    partitions: { type: 'string', default: '6' },
    gzip: { type: 'boolean', default: false },
    'in-process': { type: 'boolean', default: false },
  },
});
const total = Number(values.messages);
const batchSize = Number(values.batch);
const valueBytes = Number(values['value-bytes']);
const partitions = Number(values.partitions);
const topic = 'throughput';

async function startExternal(): Promise<{ brokers: string[]; child: ChildProcess }> {
  const main = fileURLToPath(new URL('./main.ts', import.meta.url));
  const child = spawn(process.execPath, [main, '--port', '0', '--topic', `${topic}:${partitions}`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const address = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const m = /listening (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`stand-in exited with ${code}`)));
  });
  return { brokers: [address], child };
}

let standin: KafkaStandIn | undefined;
let child: ChildProcess | undefined;
let brokers: string[];
if (values['in-process']) {
  standin = await KafkaStandIn.start();
  standin.createTopic(topic, { partitions });
  brokers = standin.brokers;
} else {
  ({ brokers, child } = await startExternal());
}

try {
  const kafka = new Kafka({ clientId: 'throughput', brokers, logLevel: logLevel.WARN });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const payloads = Array.from({ length: 64 }, () => randomBytes(valueBytes / 2).toString('hex'));
  const makeBatch = (from: number) =>
    Array.from({ length: Math.min(batchSize, total - from) }, (_, i) => ({
      key: `key-${(from + i) % 1000}`,
      value: payloads[(from + i) % payloads.length]!,
    }));

  // Warm-up: connections, metadata and JIT.
  await producer.send({ topic, acks: -1, messages: makeBatch(0) });
  const started = performance.now();
  for (let sent = 0; sent < total; sent += batchSize) {
    await producer.send({
      topic,
      acks: -1,
      compression: values.gzip ? CompressionTypes.GZIP : CompressionTypes.None,
      messages: makeBatch(sent),
    });
  }
  const seconds = (performance.now() - started) / 1000;

  const admin = kafka.admin();
  await admin.connect();
  const stored = (await admin.fetchTopicOffsets(topic)).reduce((n, o) => n + Number(o.high), 0);
  await admin.disconnect();
  await producer.disconnect();

  const rate = total / seconds;
  console.log(
    `${total} messages of ${valueBytes} B in batches of ${batchSize} (${partitions} partitions, ` +
      `${values.gzip ? 'gzip' : 'uncompressed'}, stand-in ${values['in-process'] ? 'in-process' : 'in its own process'}): ` +
      `${seconds.toFixed(2)} s, ${Math.round(rate)} msg/s, ${((rate * valueBytes) / 1e6).toFixed(1)} MB/s of values; ` +
      `stored ${stored} (${total + Math.min(batchSize, total)} expected incl. warm-up)`,
  );
} finally {
  await standin?.stop();
  child?.kill('SIGTERM');
}
