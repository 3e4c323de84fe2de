import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
const CREATE = fileURLToPath(new URL('./create.ts', import.meta.url));
const LOAD = fileURLToPath(new URL('../config/load.ts', import.meta.url));
const LOGGER = fileURLToPath(new URL('../observability/logger.ts', import.meta.url));

/** A child's lines that make the sink `run` would make from these flags (config and logger as the CLI's). */
const makeSink = (flags: string[]) => `
  const { loadConfig } = await import(${JSON.stringify(LOAD)});
  const { silentLogger } = await import(${JSON.stringify(LOGGER)});
  const { createSink } = await import(${JSON.stringify(CREATE)});
  const c = loadConfig('run', ${JSON.stringify(['--database-url', 'postgres://relay@127.0.0.1:9/db', ...flags])}, {}).config;
  const sink = await createSink(c, silentLogger());
`;

/** The other broker sinks' client libraries: loaded only by the sink that uses them. */
const CLIENTS = ['@aws-sdk/', 'ioredis', 'amqplib', '@nats-io/', 'undici'];

/**
 * The packages a node process resolved (module.registerHooks sees every import and require) while
 * running `script`; NODE_OPTIONS cleared so vitest's own loader is not inherited.
 */
function packagesLoaded(script: string): string[] {
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `
      const { registerHooks } = await import('node:module');
      const seen = new Set();
      registerHooks({
        resolve(specifier, context, next) {
          const r = next(specifier, context);
          const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url);
          if (m) seen.add(m[1]);
          return r;
        },
      });
      ${script}
      process.stdout.write('\\n' + JSON.stringify([...seen]));
      `,
    ],
    { env: { ...process.env, NODE_OPTIONS: '' }, encoding: 'utf8' },
  );
  return JSON.parse(out.trim().split('\n').at(-1)!) as string[];
}

describe('createSink', () => {
  it("keeps the other broker sinks' client libraries out of a Kafka relay (issue 39: ~17 MB of RSS)", () => {
    // The CLI's whole static module graph (every command's), then a Kafka sink made as `run` makes it.
    const loaded = packagesLoaded(`
      process.argv = [process.argv[0], ${JSON.stringify(CLI)}, '--version'];
      await import(${JSON.stringify(CLI)});
      ${makeSink(['--kafka-brokers', '127.0.0.1:9'])}
      if (sink.name !== 'kafka') throw new Error('not the Kafka sink: ' + sink.name);
    `);
    expect(loaded).toContain('kafkajs');
    for (const client of CLIENTS) expect(loaded.filter((p) => p.startsWith(client))).toEqual([]);
  }, 60_000);

  it('loads a sink chosen at start, with its client library', () => {
    const loaded = packagesLoaded(`
      ${makeSink(['--sink', 'redis', '--redis-url', 'redis://127.0.0.1:9'])}
      if (sink.name !== 'redis') throw new Error('not the Redis sink: ' + sink.name);
    `);
    expect(loaded).toContain('ioredis');
    expect(loaded).not.toContain('amqplib');
  }, 60_000);
});
