/**
 * `npm run playground`: a throwaway PostgreSQL, a local destination (Apache Kafka by default;
 * Redis, a webhook receiver or ElasticMQ with --sink), the relay with its console and a trickle of
 * sample events, until Ctrl-C. See src/dev/playground.ts.
 *
 *   npm run playground [-- --sink kafka|redis|http|sqs] [--dir .tmp/playground] [--every-ms 1000]
 */
import { parseArgs } from 'node:util';
import { runPlayground } from '../src/dev/playground.ts';
import { PLAYGROUND_SINKS, type PlaygroundSink } from '../src/dev/playground-destinations.ts';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafka/kafkajs/warnings.ts';

const USAGE = `usage: npm run playground [-- --sink kafka|redis|http|sqs] [--dir .tmp/playground] [--every-ms 1000]

Starts a throwaway PostgreSQL (local server binaries) and a destination of its own on loopback:
  --sink kafka (default)  a one-node Apache Kafka from its jars (port 19092, or a free one when it
                          is taken; the first run downloads the jars: Java >= 17 and Maven)
  --sink redis            a redis-server (appendonly yes) on a free port (Debian's redis-server)
  --sink http             a webhook receiver in this process that verifies every signature
  --sink sqs              ElasticMQ, an SQS-compatible server, from its jars (Java >= 17, Maven)
It creates the topics (streams, queues) of the sample events and of the README's example, runs
the relay with its console, and writes a sample event every --every-ms (every tenth to a topic
that fails on purpose: not created, a key that is not a stream, a 404). Prints the console's URL
with its operator token, how to read the events back (Redis, webhooks and SQS: each event is
printed as it arrives), and writes <dir>/env (export DATABASE_URL=… and the destination's).
Ctrl-C or SIGTERM stops everything (a second one at once).
Exit codes: 0 stopped, 64 bad usage, 69 something could not start (the reason is printed).`;

function usage(msg: string): never {
  process.stderr.write(`playground: ${msg}\n${USAGE}\n`);
  process.exit(64);
}

let values: { dir?: string; 'every-ms'?: string; sink?: string; help?: boolean };
try {
  ({ values } = parseArgs({
    options: {
      dir: { type: 'string', default: '.tmp/playground' },
      'every-ms': { type: 'string', default: '1000' },
      sink: { type: 'string', default: 'kafka' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }));
} catch (e) {
  usage((e as Error).message);
}
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const everyMs = Number(values['every-ms']);
if (!Number.isInteger(everyMs) || everyMs < 10)
  usage(`--every-ms must be an integer >= 10; got "${values['every-ms']}"`);
const sink = values.sink as PlaygroundSink;
if (!PLAYGROUND_SINKS.includes(sink))
  usage(`--sink must be one of ${PLAYGROUND_SINKS.join(', ')}; got "${values.sink}"`);

hideKafkajsTimeoutWarnings();
// Handlers stay installed (never `once`): with a listener of ours, throwaway-postgres leaves the
// signal to us. The first stops everything in order; the second exits at once, and the exit
// handlers kill the broker and the server.
let signals = 0;
let stopRequested: () => void = () => {};
const stop = new Promise<void>((resolve) => {
  stopRequested = resolve;
});
const onSignal = () => {
  if (++signals === 1) stopRequested();
  else process.exit(130);
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
runPlayground({
  dir: values.dir!,
  everyMs,
  sink,
  stop,
  out: (line) => process.stdout.write(`${line}\n`),
}).then(
  () => process.exit(0),
  (e: Error) => {
    process.stderr.write(`playground: ${e.message}\n`);
    process.exit(69);
  },
);
