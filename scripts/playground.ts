/**
 * `npm run playground`: a throwaway PostgreSQL, a local Apache Kafka, the relay with its console
 * and a trickle of sample events, until Ctrl-C. See src/dev/playground.ts.
 *
 *   npm run playground [-- --dir .tmp/playground] [--every-ms 1000]
 */
import { parseArgs } from 'node:util';
import { runPlayground } from '../src/dev/playground.ts';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafka/kafkajs/warnings.ts';

const USAGE = `usage: npm run playground [-- --dir .tmp/playground] [--every-ms 1000]

Starts a throwaway PostgreSQL (local server binaries), a one-node Apache Kafka from its jars
(port 19092, or a free one when it is taken; the first run downloads the jars: Java >= 17 and
Maven), creates the topics of the sample events and of the README's example, runs the relay
with its console, and writes a sample event every --every-ms (every tenth to a topic that is
not created, so it fails). Prints the console's URL with its operator token, the kcat command
that reads the events back, and writes <dir>/env (export DATABASE_URL=… KAFKA_BROKERS=…).
Ctrl-C or SIGTERM stops everything (a second one at once).
Exit codes: 0 stopped, 64 bad usage, 69 something could not start (the reason is printed).`;

function usage(msg: string): never {
  process.stderr.write(`playground: ${msg}\n${USAGE}\n`);
  process.exit(64);
}

let values: { dir?: string; 'every-ms'?: string; help?: boolean };
try {
  ({ values } = parseArgs({
    options: {
      dir: { type: 'string', default: '.tmp/playground' },
      'every-ms': { type: 'string', default: '1000' },
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
runPlayground({ dir: values.dir!, everyMs, stop, out: (line) => process.stdout.write(`${line}\n`) }).then(
  () => process.exit(0),
  (e: Error) => {
    process.stderr.write(`playground: ${e.message}\n`);
    process.exit(69);
  },
);
