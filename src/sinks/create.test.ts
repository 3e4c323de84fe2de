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
 * Loaded only when chosen (issue 39, item 4): the compression codecs' native modules, protobuf-es
 * (the envelope value formats, the schema registry) and yaml (a config file).
 */
const ON_USE = ['snappy', 'lz4-napi', '@bufbuild/', 'yaml'];
const CODECS = fileURLToPath(new URL('./kafka/kafka-codecs.ts', import.meta.url));
const VALUE_FORMAT = fileURLToPath(new URL('../route/value-format.ts', import.meta.url));
const EVENT = fileURLToPath(new URL('../../test/support/outbox-event.ts', import.meta.url));

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
  it("keeps the other broker sinks' client libraries, and what only some Kafka relays use, out of a Kafka relay (issue 39: ~17 + ~19 MB of RSS)", () => {
    // The CLI's whole static module graph (every command's), then a Kafka sink made as `run` makes it.
    const loaded = packagesLoaded(`
      process.argv = [process.argv[0], ${JSON.stringify(CLI)}, '--version'];
      await import(${JSON.stringify(CLI)});
      ${makeSink(['--kafka-brokers', '127.0.0.1:9'])}
      if (sink.name !== 'kafka') throw new Error('not the Kafka sink: ' + sink.name);
    `);
    expect(loaded).toContain('kafkajs');
    for (const client of [...CLIENTS, ...ON_USE])
      expect(loaded.filter((p) => p.startsWith(client))).toEqual([]);
  }, 60_000);

  it("loads a compression codec's native module when the codec is chosen", () => {
    const loaded = packagesLoaded(`
      const { loadCodec, codecById, CODEC_IDS } = await import(${JSON.stringify(CODECS)});
      if (codecById(CODEC_IDS.lz4) !== undefined) throw new Error('lz4 loaded before it was chosen');
      const lz4 = await loadCodec('lz4');
      if (codecById(CODEC_IDS.lz4) !== lz4) throw new Error('the loaded lz4 codec is not the one codecById gives');
    `);
    expect(loaded).toContain('lz4-napi');
    expect(loaded).not.toContain('snappy');
  }, 60_000);

  it('loads protobuf-es with the first envelope value, and yaml with a config file', () => {
    // `seen`: the packages resolved so far (packagesLoaded's hook).
    const loaded = packagesLoaded(`
      const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
      const { tmpdir } = await import('node:os');
      const has = (prefix) => [...seen].some((p) => p.startsWith(prefix));
      const { encodeValue } = await import(${JSON.stringify(VALUE_FORMAT)});
      const { outboxEvent } = await import(${JSON.stringify(EVENT)});
      const { loadConfig } = await import(${JSON.stringify(LOAD)});
      encodeValue(outboxEvent(), 'raw');
      if (has('@bufbuild/')) throw new Error('protobuf-es loaded for a raw value');
      const { value } = encodeValue(outboxEvent(), 'envelope-protobuf');
      if (!has('@bufbuild/') || !(value instanceof Buffer) || value.length === 0) throw new Error('no envelope value');
      const url = ['--database-url', 'postgres://relay@127.0.0.1:9/db'];
      loadConfig('run', [...url, '--kafka-brokers', 'k:1'], {});
      if (has('yaml')) throw new Error('yaml loaded without a config file');
      const dir = mkdtempSync(tmpdir() + '/create-test-');
      try {
        writeFileSync(dir + '/relay.yaml', 'kafkaBrokers:\\n  - f:1\\n');
        const c = loadConfig('run', [...url, '--config', dir + '/relay.yaml'], {}).config;
        if (c.kafkaBrokers[0] !== 'f:1') throw new Error('config file not read: ' + c.kafkaBrokers);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    `);
    expect(loaded).toContain('yaml');
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
