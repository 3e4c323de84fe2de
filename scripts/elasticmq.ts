/**
 * `npm run elasticmq -- fetch|up`: ElasticMQ, the SQS-compatible server the SQS sink's tests run
 * against, from its jars on Maven Central (src/dev/local-elasticmq.ts).
 *
 *   npm run elasticmq -- fetch                      resolve the jars into .cache/elasticmq (what CI does)
 *   npm run elasticmq -- up --queue orders.fifo     a server in the foreground until Ctrl-C
 */
import { parseArgs } from 'node:util';
import {
  DEFAULT_ELASTICMQ_VERSION,
  ensureElasticMqJars,
  LocalElasticMq,
} from '../src/dev/local-elasticmq.ts';

const USAGE = `usage:
  npm run elasticmq -- fetch [--version V]
  npm run elasticmq -- up [--queue NAME]... [--persistent] [--version V]

fetch   resolves org.elasticmq:elasticmq-server_3 and its dependencies into the cache.
up      starts a server on a free loopback port with the named queues (NAME.fifo: a FIFO queue),
        prints its endpoint and queue URLs, and stops it on Ctrl-C.
--version  default: ELASTICMQ_VERSION or ${DEFAULT_ELASTICMQ_VERSION}.`;

async function main(): Promise<void> {
  const parse = () =>
    parseArgs({
      allowPositionals: true,
      options: {
        version: { type: 'string' },
        queue: { type: 'string', multiple: true, default: [] },
        persistent: { type: 'boolean', default: false },
      },
    });
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse();
  } catch (e) {
    process.stderr.write(`elasticmq: ${(e as Error).message}\n${USAGE}\n`);
    process.exit(64);
  }
  const { values, positionals } = parsed;
  const log = (l: string) => process.stderr.write(`${l}\n`);
  switch (positionals[0]) {
    case 'fetch':
      process.stdout.write(`${ensureElasticMqJars(values.version, log)}\n`);
      return;
    case 'up': {
      const q = await LocalElasticMq.start({
        queues: values.queue,
        persistent: values.persistent,
        ...(values.version ? { version: values.version } : {}),
      });
      process.stdout.write(`endpoint=${q.endpoint}\n`);
      for (const name of values.queue) process.stdout.write(`queue=${q.queueUrl(name)}\n`);
      const stop = () => void q.stop().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      return;
    }
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exit(64);
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`elasticmq: ${(e as Error).message}\n`);
  process.exit(69);
});
