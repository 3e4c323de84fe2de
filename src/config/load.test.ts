import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { isRelayError } from '../errors.ts';
import { type Config, loadConfig, redactUrl, redactWebhookUrl } from './load.ts';
import { type OptionKey, optionsFor } from './options.ts';
import { maskSecret } from './print.ts';
import { UsageError } from './usage-error.ts';

const DB = 'postgres://relay:s3cret@db:5432/app';

describe('loadConfig', () => {
  it('Config is derived from OPTIONS: a field for every option and no other (tsc checks the types)', () => {
    expectTypeOf<keyof Config>().toEqualTypeOf<OptionKey>();
    expectTypeOf<Config['compat']>().toEqualTypeOf<'none' | 'debezium'>();
    expectTypeOf<Config['batchSize']>().toEqualTypeOf<number>();
    expectTypeOf<Config['kafkaSslCaFile']>().toEqualTypeOf<string | undefined>();
    const { config } = loadConfig('run', ['--database-url', DB, '--kafka-brokers', 'k1:9092'], {});
    expect(Object.keys(config).sort()).toEqual(
      optionsFor('run')
        .map((o) => o.key)
        .sort(),
    );
  });

  it('applies defaults', () => {
    const { config } = loadConfig('run', ['--database-url', DB, '--kafka-brokers', 'k1:9092'], {});
    expect(config.schema).toBe('public');
    expect(config.publication).toBe('outbox_pub');
    expect(config.slot).toBe('outbox_relay');
    expect(config.topicTemplate).toBe('outbox.event.{aggregate_type}');
    expect(config.markPublished).toBe(true);
    expect(config.kafkaBrokers).toEqual(['k1:9092']);
  });

  it('takes flags over the config file over the environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'relay.json');
    writeFileSync(file, JSON.stringify({ batchSize: 50, slot: 'from_file', kafkaBrokers: ['f:1'] }));
    const env = {
      DATABASE_URL: DB,
      OUTBOX_BATCH_SIZE: '7',
      OUTBOX_SLOT: 'from_env',
      OUTBOX_LINGER_MS: '9',
      KAFKA_BROKERS: 'e:1',
    };
    const { config } = loadConfig('run', ['--config', file, '--batch-size', '100'], env);
    expect(config.batchSize).toBe(100);
    expect(config.slot).toBe('from_file');
    expect(config.lingerMs).toBe(9);
    expect(config.kafkaBrokers).toEqual(['f:1']);
  });

  it('parses booleans, --no- flags, lists and maps', () => {
    const { config } = loadConfig(
      'run',
      ['--no-prune', '--topic-override', 'Order=orders', '--topic-override', 'Customer=crm.customers'],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'a:1, b:2', KAFKA_SSL: 'yes' },
    );
    expect(config.prune).toBe(false);
    expect(config.kafkaSsl).toBe(true);
    expect(config.kafkaBrokers).toEqual(['a:1', 'b:2']);
    expect(config.topicOverrides).toEqual({ Order: 'orders', Customer: 'crm.customers' });
  });

  it('--no-mark-published is a configuration error naming the progress record (issue 11)', () => {
    expect(() =>
      loadConfig('run', ['--no-mark-published'], { DATABASE_URL: DB, KAFKA_BROKERS: 'a:1' }),
    ).toThrow(
      /--mark-published .*was removed: the relay records published events in the slot's progress record/,
    );
    expect(() =>
      loadConfig('run', [], { DATABASE_URL: DB, KAFKA_BROKERS: 'a:1', OUTBOX_MARK_PUBLISHED: 'false' }),
    ).toThrow(/was removed/);
    expect(
      loadConfig('run', ['--mark-published'], { DATABASE_URL: DB, KAFKA_BROKERS: 'a:1' }).config
        .markPublished,
    ).toBe(true);
  });

  it('--delivery exactly-once: Kafka only, and not with the Debezium preset', () => {
    const env = { DATABASE_URL: DB, KAFKA_BROKERS: 'a:1' };
    expect(loadConfig('run', ['--delivery', 'exactly-once'], env).config.delivery).toBe('exactly-once');
    expect(() => loadConfig('run', ['--delivery', 'exactly-once', '--sink', 'stdout'], env)).toThrow(
      /exactly-once needs --sink kafka/,
    );
    expect(() => loadConfig('run', ['--delivery', 'exactly-once', '--compat', 'debezium'], env)).toThrow(
      /exactly-once is not available with --compat debezium/,
    );
  });

  it('--delivery exactly-once: --max-inflight-events defaults to 40,000 (room for a transaction of several batches); a value set is kept', () => {
    const env = { DATABASE_URL: DB, KAFKA_BROKERS: 'a:1' };
    expect(loadConfig('run', [], env).config.maxInflightEvents).toBe(5000);
    expect(loadConfig('run', ['--delivery', 'exactly-once'], env).config.maxInflightEvents).toBe(40_000);
    expect(
      loadConfig('run', ['--delivery', 'exactly-once'], { ...env, OUTBOX_MAX_INFLIGHT_EVENTS: '5000' }).config
        .maxInflightEvents,
    ).toBe(5000);
    expect(loadConfig('run', ['--delivery', 'exactly-once'], env).config.kafkaTransactionBatches).toBe(8);
  });

  it('reads secrets from <ENV>_FILE', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    writeFileSync(join(dir, 'pw'), 'hunter2\n');
    writeFileSync(join(dir, 'url'), `${DB}\n`);
    const { config } = loadConfig('run', [], {
      DATABASE_URL_FILE: join(dir, 'url'),
      KAFKA_BROKERS: 'k:1',
      KAFKA_SASL_MECHANISM: 'plain',
      KAFKA_SASL_USERNAME: 'u',
      KAFKA_SASL_PASSWORD_FILE: join(dir, 'pw'),
    });
    expect(config.kafkaSaslPassword).toBe('hunter2');
    expect(config.databaseUrl).toBe(DB);
  });

  const bad: [string, string[], Record<string, string>, RegExp][] = [
    ['missing database url', ['--kafka-brokers', 'k:1'], {}, /--database-url \/ DATABASE_URL: is required/],
    [
      'non-numeric batch size',
      ['--batch-size', 'lots'],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1' },
      /--batch-size \(flag\): expected a whole number, got "lots"/,
    ],
    [
      'enum out of range',
      [],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1', OUTBOX_SINK: 'kinesis' },
      /OUTBOX_SINK \(environment\): expected one of kafka, nats, rabbitmq, http, redis, sqs, stdout/,
    ],
    [
      'missing brokers',
      ['--database-url', DB],
      {},
      /--kafka-brokers \/ KAFKA_BROKERS: is required with --sink kafka/,
    ],
    [
      'bad template',
      ['--topic-template', 'x.{aggregate}'],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1' },
      /unknown placeholder \{aggregate\}/,
    ],
    ['unknown flag', ['--kafka-broker', 'k:1'], { DATABASE_URL: DB }, /Unknown option '--kafka-broker'/],
    [
      'bad slot name',
      ['--slot', 'My-Slot'],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1' },
      /not a valid slot name/,
    ],
    [
      'bad override',
      ['--topic-override', 'Order'],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1' },
      /expected KEY=VALUE/,
    ],
    [
      'oauthbearer without a token source',
      ['--kafka-sasl-mechanism', 'oauthbearer'],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1' },
      /--kafka-sasl-mechanism \/ KAFKA_SASL_MECHANISM: oauthbearer needs --kafka-oauth-token-url .* or --kafka-oauth-token-command/,
    ],
    [
      'oauthbearer token endpoint without a client secret',
      [],
      {
        DATABASE_URL: DB,
        KAFKA_BROKERS: 'k:1',
        KAFKA_SASL_MECHANISM: 'oauthbearer',
        KAFKA_OAUTH_TOKEN_URL: 'https://idp/token',
        KAFKA_OAUTH_CLIENT_ID: 'relay',
      },
      /--kafka-oauth-client-secret \/ KAFKA_OAUTH_CLIENT_SECRET: is required with --kafka-oauth-token-url: set KAFKA_OAUTH_CLIENT_SECRET_FILE/,
    ],
    [
      'oauthbearer extension with a bad name',
      [],
      {
        DATABASE_URL: DB,
        KAFKA_BROKERS: 'k:1',
        KAFKA_SASL_MECHANISM: 'oauthbearer',
        KAFKA_OAUTH_TOKEN_COMMAND: 'get-token',
        KAFKA_OAUTH_EXTENSIONS: 'logical_cluster=lkc-1',
      },
      /--kafka-oauth-extension \/ KAFKA_OAUTH_EXTENSIONS: "logical_cluster": an extension name is letters only/,
    ],
    [
      'oauthbearer with both a token endpoint and a command',
      [],
      {
        DATABASE_URL: DB,
        KAFKA_BROKERS: 'k:1',
        KAFKA_SASL_MECHANISM: 'oauthbearer',
        KAFKA_OAUTH_TOKEN_URL: 'https://idp/token',
        KAFKA_OAUTH_TOKEN_COMMAND: 'get-token',
      },
      /not both/,
    ],
    [
      'oauthbearer token URL that is not http(s)',
      [],
      {
        DATABASE_URL: DB,
        KAFKA_BROKERS: 'k:1',
        KAFKA_SASL_MECHANISM: 'oauthbearer',
        KAFKA_OAUTH_TOKEN_URL: 'idp/token',
      },
      /--kafka-oauth-token-url \/ KAFKA_OAUTH_TOKEN_URL: "idp\/token" is not an http\(s\) URL/,
    ],
    [
      'a schema registry with nothing to frame',
      [],
      { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1', SCHEMA_REGISTRY_URL: 'http://sr:8081' },
      /--schema-registry-url \/ SCHEMA_REGISTRY_URL: frames envelope-protobuf values only.*set --value-format envelope-protobuf/,
    ],
    [
      'a schema registry URL that is not http(s)',
      [],
      {
        DATABASE_URL: DB,
        KAFKA_BROKERS: 'k:1',
        OUTBOX_VALUE_FORMAT: 'envelope-protobuf',
        SCHEMA_REGISTRY_URL: 'sr:8081',
      },
      /"sr:8081" is not an http\(s\) URL/,
    ],
    [
      'a schema registry password without a user',
      [],
      {
        DATABASE_URL: DB,
        KAFKA_BROKERS: 'k:1',
        OUTBOX_VALUE_FORMAT_OVERRIDES: 'Order=envelope-protobuf',
        SCHEMA_REGISTRY_URL: 'https://sr',
        SCHEMA_REGISTRY_PASSWORD: 'pw',
      },
      /--schema-registry-username \/ SCHEMA_REGISTRY_USERNAME: is required with a registry password/,
    ],
  ];
  for (const [name, argv, env, message] of bad) {
    it(`rejects ${name} with an error naming the field`, () => {
      let caught: unknown;
      try {
        loadConfig('run', argv, env);
      } catch (e) {
        caught = e;
      }
      // A bad command line is a usage error (exit 64); a bad combination or environment value is
      // bad configuration (CONFIG_INVALID, exit 78).
      const fromCommandLine = argv.some((a) =>
        /^--(kafka-broker|batch-size|topic-override|topic-template|slot)$/.test(a),
      );
      if (fromCommandLine) expect(caught).toBeInstanceOf(UsageError);
      else expect(isRelayError(caught, 'CONFIG_INVALID')).toBe(true);
      expect((caught as Error).message).toMatch(message);
    });
  }

  it('reads a YAML config file; keys of other commands are accepted and ignored, unknown keys rejected', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-yaml-'));
    const file = join(dir, 'relay.yaml');
    writeFileSync(
      file,
      'databaseUrl: postgres://relay@db/app\nkafkaBrokers: [k1:9092, k2:9092]\nbatchSize: 100\nsince: 2h\nlimit: 5\n',
    );
    const run = loadConfig('run', ['--config', file], {}).config;
    expect(run.kafkaBrokers).toEqual(['k1:9092', 'k2:9092']);
    expect(run.batchSize).toBe(100);
    expect(loadConfig('migrate', ['--config', file], {}).config.databaseUrl).toBe('postgres://relay@db/app');
    expect(loadConfig('events', ['--config', file], {}, { sub: 'list' }).config.limit).toBe(5);
    writeFileSync(file, 'databaseUrl: postgres://relay@db/app\nbatchSzie: 1\n');
    expect(() => loadConfig('check', ['--config', file], {})).toThrow(
      /unknown option "batchSzie".*did you mean "batchSize"/,
    );
    writeFileSync(file, 'databaseUrl: [unclosed\n');
    expect(() => loadConfig('check', ['--config', file], {})).toThrow(/not valid JSON or YAML/);
  });

  it('takes --no-<flag> only for booleans that make sense negated, and each subcommand only its own flags', () => {
    expect(loadConfig('run', ['--no-prune'], { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1' }).config.prune).toBe(
      false,
    );
    expect(() =>
      loadConfig('events', ['discard', '--no-yes'], { DATABASE_URL: DB }, { sub: 'discard' }),
    ).toThrow(UsageError);
    expect(() =>
      loadConfig('events', ['show', '1', '--status', 'dead'], { DATABASE_URL: DB }, { sub: 'show' }),
    ).toThrow(/Unknown option '--status'/);
    expect(
      loadConfig('events', ['list', '--status', 'dead'], { DATABASE_URL: DB }, { sub: 'list' }).config.status,
    ).toEqual(['dead']);
  });

  it('tells where each value came from', () => {
    const { sources } = loadConfig('run', ['--batch-size', '5'], { DATABASE_URL: DB, KAFKA_BROKERS: 'k:1' });
    expect(sources).toMatchObject({ batchSize: 'flag', databaseUrl: 'environment', lingerMs: 'default' });
  });

  it('never echoes a secret in an error', () => {
    let message = '';
    try {
      loadConfig('run', ['--kafka-sasl-mechanism', 'plain', '--kafka-sasl-password', 'hunter2'], {
        DATABASE_URL: DB,
        KAFKA_BROKERS: 'k:1',
      });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/needs --kafka-sasl-username/);
    expect(message).not.toContain('hunter2');
    expect(redactUrl(DB)).toBe('postgres://relay:***@db:5432/app');
    // A lone user part of a Redis URL (a mistaken password) and secret-named parameters are hidden too.
    expect(redactUrl('redis://s3cret@r:6379/0')).toBe('redis://***@r:6379/0');
    expect(redactUrl('redis://:s3cret@r:6379')).toBe('redis://:***@r:6379');
    expect(redactUrl('rediss://r:6379/0?password=s3cret&db=1')).toBe('rediss://r:6379/0?password=***&db=1');
    expect(redactUrl('postgres://relay@db/app?sslpassword=x')).toBe(
      'postgres://relay@db/app?sslpassword=***',
    );
  });

  it("shows a webhook URL without the token its path or query may carry (Slack, Discord, Azure Functions' ?code=)", () => {
    expect(
      redactWebhookUrl('https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'),
    ).toBe('https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX');
    expect(
      redactWebhookUrl('https://hooks.slack.com/services/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'),
    ).toBe('https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D4/***');
    expect(
      redactWebhookUrl('https://discord.com/api/webhooks/123456789012345678/aBcD-eFgH_1234567890abcdefGHIJ'),
    ).toBe('https://discord.com/api/webhooks/123456789012345678/***'); // the id (digits only) is not the secret
    expect(redactWebhookUrl('https://fn.azurewebsites.net/api/hook/{topic}?code=s3cretC0de&x')).toBe(
      'https://fn.azurewebsites.net/api/hook/{topic}?code=***&***',
    );
    // Placeholders and ordinary words stay; a user-info part never shows.
    expect(redactWebhookUrl('https://u:pw@hooks.example:8443/events/{aggregate_type}/{event_type}')).toBe(
      'https://hooks.example:8443/events/{aggregate_type}/{event_type}',
    );
    expect(redactWebhookUrl('not a url')).toBe('(unparsable url)');
    // config print shows --http-url so, not as given.
    const spec = optionsFor('run').find((s) => s.key === 'httpUrl')!;
    expect(maskSecret(spec, 'https://h.example/hook/a1b2c3d4e5f6a7b8c9d0?sig=abc')).toBe(
      'https://h.example/hook/***?sig=***',
    );
    let message = '';
    try {
      loadConfig('run', ['--sink', 'http'], {
        DATABASE_URL: DB,
        WEBHOOK_URL: 'ftp://h.example/hook/a1b2c3d4e5f6a7b8c9d0',
        WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 1).toString('base64')}`,
      });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/is not an http:\/\/ or https:\/\/ URL/);
    expect(message).not.toContain('a1b2c3d4e5f6a7b8c9d0');
  });

  it('refuses a Redis URL whose secret sits in the user part, without echoing it', () => {
    let message = '';
    try {
      loadConfig('run', ['--sink', 'redis'], { DATABASE_URL: DB, REDIS_URL: 'redis://s3cret@r:6379/0' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/user part and no password.*redis:\/\/:PASSWORD@host/);
    expect(message).not.toContain('s3cret');
    expect(() =>
      loadConfig('run', ['--sink', 'redis'], { DATABASE_URL: DB, REDIS_URL: 'redis://:s3cret@r:6379/0' }),
    ).not.toThrow();
    expect(() =>
      loadConfig('run', ['--sink', 'redis'], { DATABASE_URL: DB, REDIS_URL: 'redis://app:s3cret@r:6379/0' }),
    ).not.toThrow();
  });
});
