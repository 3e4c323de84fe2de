import { describe, expect, it } from 'vitest';
import { loadConfig } from './load.ts';

/** The NATS and RabbitMQ sink options (docs/sinks.md): required ones, pairs, secrets. */
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
