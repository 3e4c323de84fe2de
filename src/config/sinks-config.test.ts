import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './load.ts';

/** The NATS, RabbitMQ and Redis sink options (docs/sinks.md): required ones, pairs, secrets. */
const DB = ['--database-url', 'postgres://relay@db:5432/app'];
const run =
  (args: string[], env: Record<string, string> = {}) =>
  () =>
    loadConfig('run', [...DB, ...args], env);

describe('sink options', () => {
  it('--sink nats needs servers, in nats://host:port form', () => {
    expect(run(['--sink', 'nats'])).toThrow(/--nats-servers \/ NATS_URL: is required with --sink nats/);
    expect(run(['--sink', 'nats', '--nats-servers', 'http://n:4222'])).toThrow(/is not nats:\/\/host:port/);
    const { config } = loadConfig('run', [...DB, '--sink', 'nats'], { NATS_URL: 'nats://a:4222,b:4222' });
    expect(config.natsServers).toEqual(['nats://a:4222', 'b:4222']);
    expect(config.natsTimeoutMs).toBe(10_000);
    expect(config.natsMaxPending).toBe(256);
  });

  it('a NATS user needs its password, and a token excludes them', () => {
    expect(run(['--sink', 'nats', '--nats-servers', 'nats://n:4222', '--nats-user', 'relay'])).toThrow(
      /--nats-user (\(flag\)|\/ NATS_USER): user and password go together/,
    );
    const { config } = loadConfig('run', [...DB, '--sink', 'nats', '--nats-servers', 'nats://n:4222'], {
      NATS_USER: 'relay',
      NATS_PASSWORD: 'hunter2',
    });
    expect(config.natsPassword).toBe('hunter2');
  });

  it('--sink rabbitmq needs an amqp URL, which is a secret', () => {
    expect(run(['--sink', 'rabbitmq'])).toThrow(
      /--rabbitmq-url \/ RABBITMQ_URL: is required with --sink rabbitmq/,
    );
    let caught: unknown;
    try {
      run(['--sink', 'rabbitmq'], { RABBITMQ_URL: 'http://guest:s3cret@r:5672' })();
    } catch (e) {
      caught = e;
    }
    expect((caught as Error).message).toMatch(/must start with amqp:\/\/ or amqps:\/\//);
    expect((caught as Error).message).not.toContain('s3cret');
    const { config } = loadConfig('run', [...DB, '--sink', 'rabbitmq'], { RABBITMQ_URL: 'amqp://r' });
    expect(config.rabbitmqExchange).toBe('outbox');
    expect(
      run(['--sink', 'rabbitmq', '--rabbitmq-exchange', 'x.{aggregate}'], { RABBITMQ_URL: 'amqp://r' }),
    ).toThrow(/--rabbitmq-exchange (\(flag\)|\/ RABBITMQ_EXCHANGE): .*unknown placeholder/);
  });

  it('--rabbitmq-management-url is optional, an http(s) URL, and a secret', () => {
    const env = { RABBITMQ_URL: 'amqp://r' };
    expect(
      loadConfig('run', [...DB, '--sink', 'rabbitmq'], env).config.rabbitmqManagementUrl,
    ).toBeUndefined();
    const { config } = loadConfig('run', [...DB, '--sink', 'rabbitmq'], {
      ...env,
      RABBITMQ_MANAGEMENT_URL: 'http://admin:pw@rabbit:15672',
    });
    expect(config.rabbitmqManagementUrl).toBe('http://admin:pw@rabbit:15672');
    let caught: unknown;
    try {
      run(['--sink', 'rabbitmq'], { ...env, RABBITMQ_MANAGEMENT_URL: 'amqp://admin:s3cret@rabbit' })();
    } catch (e) {
      caught = e;
    }
    expect((caught as Error).message).toMatch(/rabbitmq-management-url .*must be the management API/);
    expect((caught as Error).message).not.toContain('s3cret');
  });
  it('--sink http needs an http(s) URL template and Standard Webhooks secrets, never shown', () => {
    const secret = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    expect(run(['--sink', 'http'])).toThrow(/--http-url \/ WEBHOOK_URL: is required with --sink http/);
    expect(run(['--sink', 'http', '--http-url', 'https://h/{aggregate}'])).toThrow(
      /unknown placeholder "\{aggregate\}": use \{topic\}, \{aggregate_type\} or \{event_type\}/,
    );
    expect(run(['--sink', 'http', '--http-url', 'ftp://h/x'])).toThrow(
      /is not an http:\/\/ or https:\/\/ URL/,
    );
    expect(run(['--sink', 'http', '--http-url', 'https://u:pw@h/x'])).toThrow(/must not hold credentials/);
    expect(run(['--sink', 'http', '--http-url', 'https://h/{topic}'])).toThrow(
      /--http-secret \/ WEBHOOK_SECRET: is required with --sink http: set WEBHOOK_SECRET_FILE/,
    );
    let caught: unknown;
    try {
      run(['--sink', 'http', '--http-url', 'https://h/{topic}'], { WEBHOOK_SECRET: `${secret} hunter2` })();
    } catch (e) {
      caught = e;
    }
    expect((caught as Error).message).toMatch(/secret 2 of 2 is not a Standard Webhooks secret/);
    expect((caught as Error).message).not.toContain('hunter2');
    const { config } = loadConfig('run', [...DB, '--sink', 'http'], {
      WEBHOOK_URL: 'https://hooks.example/{topic}',
      WEBHOOK_SECRET: secret,
    });
    expect(config).toMatchObject({ httpBatchSize: 1, httpTimeoutMs: 10_000, httpMaxInFlight: 64 });
    expect(
      run(['--sink', 'http', '--http-ca-file', '/nonexistent.pem'], {
        WEBHOOK_URL: 'https://h/x',
        WEBHOOK_SECRET: secret,
      }),
    ).toThrow(/--http-ca-file .*does not exist/);
  });

  it('--sink redis needs a redis:// URL, which is a secret, from REDIS_URL or REDIS_URL_FILE', () => {
    expect(run(['--sink', 'redis'])).toThrow(/--redis-url \/ REDIS_URL: is required with --sink redis/);
    let caught: unknown;
    try {
      run(['--sink', 'redis'], { REDIS_URL: 'http://:s3cret@r:6379' })();
    } catch (e) {
      caught = e;
    }
    expect((caught as Error).message).toMatch(/redis-url .*must be redis:\/\//);
    expect((caught as Error).message).not.toContain('s3cret');
    const { config } = loadConfig('run', [...DB, '--sink', 'redis'], { REDIS_URL: 'redis://:pw@r:6379/0' });
    expect(config).toMatchObject({
      redisUrl: 'redis://:pw@r:6379/0',
      redisStreamTemplate: '{topic}',
      redisMaxlen: 0,
      redisDedupTtlS: 86_400,
      redisWaitReplicas: 0,
      redisTimeoutMs: 10_000,
      redisMaxPending: 256,
    });
    const dir = mkdtempSync(join(tmpdir(), 'redis-url-'));
    writeFileSync(join(dir, 'url'), 'rediss://:pw@r:6380\n');
    const fromFile = loadConfig('run', [...DB, '--sink', 'redis'], { REDIS_URL_FILE: join(dir, 'url') });
    expect(fromFile.config.redisUrl).toBe('rediss://:pw@r:6380');
    rmSync(dir, { recursive: true });
  });

  it('--redis-dedup-ttl-s below the retry horizon is refused with the fix', () => {
    expect(
      run(['--sink', 'redis', '--redis-dedup-ttl-s', '10', '--retry-max-ms', '30000'], {
        REDIS_URL: 'redis://r',
      }),
    ).toThrow(/redis-dedup-ttl-s .*10 s is below the retry horizon of 40 s .*stored twice; raise it/);
  });

  it('--sink sqs needs a queue URL template with known placeholders; the endpoint is http(s)://host[:port]', () => {
    expect(run(['--sink', 'sqs'])).toThrow(
      /--sqs-queue-url-template \/ SQS_QUEUE_URL_TEMPLATE: is required with --sink sqs/,
    );
    expect(
      run(['--sink', 'sqs', '--sqs-queue-url-template', 'https://sqs.x.amazonaws.com/1/{aggregate}']),
    ).toThrow(/unknown placeholder \{aggregate\}/);
    expect(run(['--sink', 'sqs', '--sqs-queue-url-template', 'orders.fifo'])).toThrow(/not a URL/);
    expect(run(['--sink', 'sqs', '--sqs-queue-url-template', 'https://sqs.x.amazonaws.com/orders'])).toThrow(
      /the path must be \/ACCOUNT_ID\/QUEUE_NAME/,
    );
    const url = 'https://sqs.eu-west-1.amazonaws.com/123456789012/{aggregate_type}.fifo';
    expect(
      run(['--sink', 'sqs', '--sqs-endpoint', 'localhost:9324'], { SQS_QUEUE_URL_TEMPLATE: url }),
    ).toThrow(/--sqs-endpoint .*is not http\(s\):\/\/host\[:port\]/);
    const { config } = loadConfig('run', [...DB, '--sink', 'sqs', '--sqs-region', 'eu-west-1'], {
      SQS_QUEUE_URL_TEMPLATE: url,
    });
    expect(config.sqsQueueUrlTemplate).toBe(url);
    expect(config.sqsRegion).toBe('eu-west-1');
    expect(config.sqsMaxInFlight).toBe(16);
    expect(config.sqsTimeoutMs).toBe(10_000);
    expect(config.sqsMaxMessageBytes).toBe(262_144);
  });
});
