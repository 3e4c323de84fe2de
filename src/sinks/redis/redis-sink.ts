import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Config } from '../../config/load.ts';
import { redactUrl } from '../../config/load.ts';
import type { Classified } from '../../errors.ts';
import type { Logger } from '../../observability/logger.ts';
import { within } from '../../retry/within.ts';
import type { OutboundMessage } from '../../route/event.ts';
import { dedupId } from '../dedup-id.ts';
import { type LaneDone, sendInLanes } from '../key-lanes.ts';
import type { Sink } from '../sink.ts';
import { infoField, preflightWarnings } from './preflight.ts';
import { classifyRedisError, RedisSinkError, replyCode } from './redis-errors.ts';
import {
  DEDUP_SCRIPT,
  dedupKey,
  entryFields,
  largestArgument,
  MAX_ENTRY_FIELDS,
  streamFor,
} from './stream-entry.ts';

export type RedisSinkConfig = Pick<
  Config,
  | 'redisUrl'
  | 'redisStreamTemplate'
  | 'redisMaxlen'
  | 'redisDedupTtlS'
  | 'redisWaitReplicas'
  | 'redisTimeoutMs'
  | 'redisMaxPending'
>;

/** Redis' default proto-max-bulk-len (512 MB), when CONFIG GET is not allowed. */
const DEFAULT_MAX_BULK = 512 * 1024 * 1024;

const SCRIPT_SHA = createHash('sha1').update(DEDUP_SCRIPT).digest('hex');

/**
 * Redis Streams through ioredis. Each event is one entry XADDed to the stream of its topic
 * (--redis-stream-template) by the dedup script (src/sinks/redis/stream-entry.ts), run by EVALSHA:
 * an event whose id was stored within --redis-dedup-ttl-s is not stored again, so re-sends after a
 * lost reply, a timeout or a relay restart leave one entry. Fields: id, type, h:<header>…, value.
 *
 * Acknowledged = the script's reply (the primary applied the XADD in memory; on disk only as AOF
 * and its fsync policy say), plus, with --redis-wait-replicas N, WAIT N after the batch.
 *
 * Ordering. Commands on one connection run in the order sent; but a command refused (OOM) or lost
 * with its connection while the next one of its key is taken would be re-sent after it. So at most
 * one event per key (per stream) awaits its reply (src/sinks/key-lanes.ts); other keys are
 * pipelined on the connection (--redis-max-pending in flight, written together by ioredis' auto
 * pipelining).
 *
 * The connection is the sink's own: no reconnect, no offline queue, no automatic re-send by the
 * library. A closed connection or a command without a reply within --redis-timeout-ms fails what
 * is in flight, the connection is dropped (so no late reply is mistaken for a new one), and the
 * next batch opens a new one.
 */
export class RedisSink implements Sink {
  readonly name = 'redis';
  readonly #c: RedisSinkConfig;
  readonly #log: Logger;
  #client: Redis | null = null;
  #opening: Promise<Redis> | null = null;
  /** The client #opening sets up (not yet #client). */
  #connecting: Redis | null = null;
  #maxBulk = DEFAULT_MAX_BULK;
  #tail: Promise<unknown> = Promise.resolve();
  /** Events the script found stored already: re-sends that were not stored twice (tests, logs). */
  duplicates = 0;
  /** Connections opened (tests). */
  connections = 0;

  constructor(c: RedisSinkConfig, log: Logger) {
    this.#c = c;
    this.#log = log.child({ component: 'redis' });
  }

  /**
   * Preflight: the server answers and the script loads; warnings when AOF is off, when Redis may
   * evict keys, when fewer replicas are connected than --redis-wait-replicas (./preflight.ts).
   */
  async start(): Promise<void> {
    const client = await this.#open();
    const info = await client.info();
    const warnings = preflightWarnings(info, this.#c.redisWaitReplicas);
    for (const w of warnings) this.#log.warn({ redis: redactUrl(this.#c.redisUrl!) }, w);
    this.#log.info(
      {
        redis: redactUrl(this.#c.redisUrl!),
        version: infoField(info, 'redis_version'),
        warnings: warnings.length,
      },
      'Redis checked',
    );
  }

  #open(): Promise<Redis> {
    if (this.#client && this.#client.status === 'ready') return Promise.resolve(this.#client);
    this.#opening ??= (async () => {
      try {
        this.#drop();
        const timeout = this.#c.redisTimeoutMs;
        const client = new Redis(this.#c.redisUrl!, {
          lazyConnect: true,
          // RESP2: the replies every server since 2.x gives; the script's reply is an array either way.
          protocol: 2,
          connectTimeout: timeout,
          commandTimeout: timeout,
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
          retryStrategy: () => null,
          maxRetriesPerRequest: 0,
          enableAutoPipelining: true,
          connectionName: 'outbox-relay',
        });
        // The server's reason (WRONGPASS, ECONNREFUSED): connect() itself rejects with "Connection is closed.".
        let reason: Error | null = null;
        client.on('error', (e: Error) => {
          reason = e;
          this.#log.warn({ err: e.message, redis: redactUrl(this.#c.redisUrl!) }, 'Redis connection error');
        });
        client.on('end', () => {
          if (this.#client === client) this.#client = null;
        });
        this.#connecting = client;
        try {
          await connectWithin(client, timeout);
          // Loaded on every connection: a restarted server has an empty script cache.
          await client.script('LOAD', DEDUP_SCRIPT);
          this.#maxBulk = await maxBulk(client);
        } catch (e) {
          client.disconnect();
          throw reason ?? e;
        } finally {
          if (this.#connecting === client) this.#connecting = null;
        }
        this.connections++;
        this.#client = client;
        return client;
      } finally {
        this.#opening = null;
      }
    })();
    return this.#opening;
  }

  /**
   * The relay stopped waiting for start() (--sink-start-timeout-ms): the connection being opened
   * is closed (its setup fails, within --redis-timeout-ms at most), as is an open one.
   */
  abandonStart(): void {
    this.#connecting?.disconnect();
    this.#drop();
  }

  /** Closes the connection: what is in flight on it fails, late replies are never read. */
  #drop(client: Redis | null = this.#client): void {
    if (!client) return;
    if (this.#client === client) this.#client = null;
    client.disconnect();
  }

  publish(batch: readonly OutboundMessage[]): Promise<void> {
    const run = this.#tail.then(() => this.#publish(batch));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #publish(batch: readonly OutboundMessage[]): Promise<void> {
    const client = this.#client?.status === 'ready' ? this.#client : await this.#open();
    const template = this.#c.redisStreamTemplate;
    const failures = await sendInLanes(
      batch,
      template === '{topic}'
        ? (m) => `${m.topic}\u0000${m.key}`
        : (m) => `${streamFor(template, m)}\u0000${m.key}`,
      this.#c.redisMaxPending,
      (m, done) => this.#sendOne(client, m, done),
    );
    if (failures.length > 0) {
      const first = failures.find((f) => this.classify(f.error).class === 'permanent') ?? failures[0]!;
      // A connection that failed a command for its own reasons (closed, timed out) is not used
      // again; an error reply (OOM, WRONGTYPE) leaves it in step.
      const broken = (e: unknown) =>
        this.classify(e).class === 'transient' &&
        !(e instanceof RedisSinkError) &&
        !replyCode((e as Error)?.message ?? '');
      if (failures.some((f) => broken(f.error))) this.#drop(client);
      throw first.error;
    }
    const n = this.#c.redisWaitReplicas;
    if (n > 0) {
      const waitMs = Math.max(50, Math.floor(this.#c.redisTimeoutMs * 0.8));
      const acked = Number(await client.wait(n, waitMs));
      if (acked < n)
        throw new RedisSinkError(
          'NOT_ENOUGH_REPLICAS',
          `WAIT ${n} ${waitMs}: only ${acked} replica(s) acknowledged the batch (--redis-wait-replicas ${n}); check the replicas (INFO replication)`,
        );
    }
  }

  /** Runs the dedup script for one event; `done` once Redis answered stored or duplicate, or with why not. */
  #sendOne(client: Redis, m: OutboundMessage, done: LaneDone, reloaded = false): void {
    const stream = streamFor(this.#c.redisStreamTemplate, m);
    if (stream === '') {
      done(new RedisSinkError('INVALID_STREAM', `event ${m.event.eventId}: the stream name is empty`));
      return;
    }
    const fields = entryFields(m);
    if (fields.length > MAX_ENTRY_FIELDS) {
      done(
        new RedisSinkError(
          'TOO_MANY_FIELDS',
          `event ${m.event.eventId}: ${fields.length / 2} fields (id, type, value and one per header) are more than one stream entry the relay writes can carry (${MAX_ENTRY_FIELDS / 2}); put fewer headers on the row`,
        ),
      );
      return;
    }
    const largest = largestArgument(fields);
    if (largest > this.#maxBulk) {
      done(
        new RedisSinkError(
          'VALUE_TOO_LARGE',
          `event ${m.event.eventId}: a field of ${largest} bytes is over the server's proto-max-bulk-len of ${this.#maxBulk}`,
        ),
      );
      return;
    }
    client
      .evalsha(
        SCRIPT_SHA,
        2,
        stream,
        dedupKey(stream, dedupId(m)),
        this.#c.redisDedupTtlS * 1000,
        this.#c.redisMaxlen,
        ...fields,
      )
      .then(
        (reply) => {
          const r = reply as [string, string] | null;
          if (!Array.isArray(r) || (r[0] !== 'stored' && r[0] !== 'duplicate')) {
            done(new RedisSinkError('BAD_REPLY', `the dedup script answered ${JSON.stringify(reply)}`));
            return;
          }
          if (r[0] === 'duplicate') this.duplicates++;
          done();
        },
        (e: unknown) => {
          // SCRIPT FLUSH (or a failover to a server without it) since this connection loaded it.
          if (!reloaded && replyCode((e as Error)?.message ?? '') === 'NOSCRIPT') {
            client.script('LOAD', DEDUP_SCRIPT).then(
              () => this.#sendOne(client, m, done, true),
              (le: unknown) => done(le),
            );
            return;
          }
          done(e);
        },
      );
  }

  classify(e: unknown): Classified {
    return classifyRedisError(e);
  }

  /** A destination-wide refusal (a key that is not a stream) is the stream's. */
  destinationOf(m: OutboundMessage): string {
    return streamFor(this.#c.redisStreamTemplate, m);
  }

  async stop(): Promise<void> {
    await this.#tail;
    const client = this.#client;
    this.#client = null;
    if (client) await client.quit().catch(() => client.disconnect());
  }
}

/**
 * client.connect(), failed after `ms`. ioredis bounds the TCP connect (connectTimeout) and each
 * command of its handshake (commandTimeout), not the handshake: a server that accepts the
 * connection and then does not answer (frozen) held connect() 3 – 4 × --redis-timeout-ms, a
 * disconnect() meanwhile still ~2 s more (until the socket's end).
 */
function connectWithin(client: Redis, ms: number): Promise<void> {
  return within(
    client.connect(),
    ms,
    () => new Error(`Redis connect timed out: no answer within ${ms} ms (--redis-timeout-ms)`),
    { onTimeout: () => client.disconnect() },
  );
}

/** The server's proto-max-bulk-len; Redis' default when CONFIG is not allowed (a managed service). */
async function maxBulk(client: Redis): Promise<number> {
  try {
    const r = (await client.config('GET', 'proto-max-bulk-len')) as string[];
    const n = Number(r?.[1]);
    return Number.isFinite(n) && n > 0 ? n : DEFAULT_MAX_BULK;
  } catch {
    return DEFAULT_MAX_BULK;
  }
}
