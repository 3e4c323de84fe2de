/**
 * `npm run kafka -- up|down|status`: a real Apache Kafka (KRaft) on loopback from Apache's jars on
 * Maven Central, for trying the relay locally and for scripts. See src/dev/local-kafka.ts.
 *
 *   npm run kafka -- up   --port 19092 --dir .tmp/kafka [--brokers 3] [--version 4.1.1]
 *   npm run kafka -- down --dir .tmp/kafka
 */
import { parseArgs } from 'node:util';
import {
  DEFAULT_KAFKA_VERSION,
  ensureKafkaJars,
  kafkaVersionFromEnv,
  LocalKafkaCluster,
} from '../src/dev/local-kafka.ts';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafka/kafkajs/warnings.ts';

const USAGE = `usage:
  npm run kafka -- up   [--dir .tmp/kafka] [--port 19092] [--brokers 1|3] [--version V] [--auto-create-topics]
  npm run kafka -- down [--dir .tmp/kafka]
  npm run kafka -- status [--dir .tmp/kafka]
  npm run kafka -- fetch [--version V]

up      starts the broker(s) (downloading Apache Kafka's jars on first use) and returns once they accept
        produce requests; prints bootstrap=HOST:PORT[,…]. On a directory whose cluster runs: no-op.
down    stops exactly the processes \`up\` started in --dir (SIGTERM, SIGKILL after 15 s). Safe to repeat.
status  prints bootstrap=… and the pid of each node, or "stopped".
fetch   only resolves the jars of a version into the cache (what CI does before the tests).

--brokers 3   a 3-node cluster on consecutive ports (replication factor 3, min.insync.replicas=2);
              node 1 also runs the KRaft controller.
--version     Apache Kafka version (default: KAFKA_VERSION or ${DEFAULT_KAFKA_VERSION}).
Exit codes: 0 ok, 64 bad usage, 69 the cluster could not start (the reason is printed).`;

function usage(msg: string): never {
  process.stderr.write(`kafka: ${msg}\n${USAGE}\n`);
  process.exit(64);
}

async function main(): Promise<void> {
  hideKafkajsTimeoutWarnings();
  let parsed: ReturnType<typeof parse>;
  function parse() {
    return parseArgs({
      allowPositionals: true,
      options: {
        dir: { type: 'string', default: '.tmp/kafka' },
        port: { type: 'string', default: '19092' },
        brokers: { type: 'string', default: '1' },
        version: { type: 'string' },
        'auto-create-topics': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  }
  try {
    parsed = parse();
  } catch (e) {
    usage((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const [command, ...rest] = positionals;
  if (rest.length > 0) usage(`unexpected argument "${rest[0]}"`);
  const dir = values.dir!;
  const log = (line: string) => process.stderr.write(`${line}\n`);
  switch (command) {
    case 'up': {
      const port = Number(values.port);
      const brokers = Number(values.brokers);
      if (!Number.isInteger(port) || port < 1 || port > 65_000)
        usage(`--port must be a port number; got "${values.port}"`);
      if (!Number.isInteger(brokers) || brokers < 1 || brokers > 9)
        usage(`--brokers must be 1..9; got "${values.brokers}"`);
      const cluster = await LocalKafkaCluster.up({
        dir,
        port,
        brokers,
        version: values.version ?? kafkaVersionFromEnv(),
        autoCreateTopics: values['auto-create-topics'],
        log,
      });
      process.stdout.write(`bootstrap=${cluster.bootstrap.join(',')}\n`);
      return;
    }
    case 'down': {
      const n = await LocalKafkaCluster.down(dir);
      log(n > 0 ? `kafka: stopped ${n} node(s) in ${dir}` : `kafka: nothing running in ${dir}`);
      return;
    }
    case 'fetch': {
      const libs = await ensureKafkaJars(values.version ?? kafkaVersionFromEnv(), log);
      process.stdout.write(`jars=${libs}\n`);
      return;
    }
    case 'status': {
      const running = await LocalKafkaCluster.status(dir);
      if (running === null) process.stdout.write('stopped\n');
      else {
        process.stdout.write(`bootstrap=${running.bootstrap.join(',')}\n`);
        for (const n of running.nodes)
          process.stdout.write(`node ${n.id}: ${n.pid === null ? 'stopped' : `pid ${n.pid}`}\n`);
      }
      return;
    }
    default:
      usage(command === undefined ? 'missing command' : `unknown command "${command}"`);
  }
}

main().catch((e: Error) => {
  process.stderr.write(`kafka: ${e.message}\n`);
  process.exit(69);
});
