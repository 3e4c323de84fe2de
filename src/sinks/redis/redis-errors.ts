/**
 * Classifies what publishing to Redis Streams raised (design.md §4). Pure and table-driven, as
 * src/sinks/kafka-errors.ts. Permanent: this event cannot be stored as it is until someone changes
 * the key, the server's limits or the event — it is recorded failed, the others flow, the sweeper
 * retries it later. Everything else — a lost or refused connection, a timeout, a server loading
 * its data or busy with a script, an unknown error — is transient: the batch is sent again (the
 * dedup script stores a re-sent event once), nothing is confirmed past it.
 *
 * A Redis error reply starts with its code (`WRONGTYPE Operation against a key…`); inside a script
 * that used redis.call the code may follow "ERR Error running script … :" (Redis 6), so the code is
 * looked for there too. Checked against redis-server 7.0 (test/integration/redis-sink.test.ts).
 *
 * Decisions:
 * - OOM (maxmemory reached with a noeviction policy) is transient: memory frees up as consumers
 *   trim or delete entries and dedup keys expire; the relay waits, nothing is lost, the failing
 *   destination shows in `status` and the console. (Permanent would fail every event while
 *   memory is short and leave their order to the sweeper.)
 * - WRONGTYPE is permanent and destination-wide: the stream's key holds another type; every
 *   event for that stream gets the same answer until someone renames the key or the template.
 * - A value longer than the server's proto-max-bulk-len is refused by the sink before it is sent
 *   (Redis answers such a command by closing the connection, which would fail the whole batch
 *   over and over): VALUE_TOO_LARGE, permanent for that event.
 * - An event with more fields than the dedup script can pass to XADD (Lua's unpack stops at 8,000
 *   values: thousands of headers on one row) is refused by the sink before it is sent:
 *   TOO_MANY_FIELDS, permanent for that event. Sent, the script's error would be transient — the
 *   same batch again, for good.
 */
import type { Classified } from '../../errors.ts';

/** The sink's own refusals, raised before or instead of a Redis answer. */
export type RedisSinkCode =
  | 'VALUE_TOO_LARGE'
  | 'TOO_MANY_FIELDS'
  | 'INVALID_STREAM'
  | 'NOT_ENOUGH_REPLICAS'
  | 'BAD_REPLY';

export class RedisSinkError extends Error {
  override readonly name = 'RedisSinkError';
  readonly code: RedisSinkCode;
  constructor(code: RedisSinkCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

export const REDIS_SINK_CODES: Readonly<
  Record<RedisSinkCode, { permanent: boolean; destinationWide?: true; meaning: string }>
> = {
  VALUE_TOO_LARGE: {
    permanent: true,
    meaning: "the event is larger than the server's proto-max-bulk-len (raise it, or make the event smaller)",
  },
  TOO_MANY_FIELDS: {
    permanent: true,
    meaning:
      "the event has more headers than one stream entry the dedup script writes can carry (Lua's unpack limit): fewer headers on the row",
  },
  INVALID_STREAM: {
    permanent: true,
    destinationWide: true,
    meaning: 'the stream name is empty (fix --redis-stream-template / --topic-template)',
  },
  NOT_ENOUGH_REPLICAS: {
    permanent: false,
    meaning: 'WAIT returned fewer replicas than --redis-wait-replicas within --redis-timeout-ms',
  },
  BAD_REPLY: { permanent: false, meaning: 'the dedup script answered something unexpected' },
};

/**
 * Redis error codes (the first word of an error reply) that are permanent for the event that got
 * them; destinationWide: the stream key itself refuses (every event to it would be refused).
 */
export const PERMANENT_REPLY_CODES: Readonly<Record<string, { why: string; destinationWide?: true }>> = {
  WRONGTYPE: {
    why: 'the stream key holds a value that is not a stream (rename the key, or change --redis-stream-template)',
    destinationWide: true,
  },
};

/**
 * Codes known to be transient, named so that a reason reads as the server's: the others (ERR …)
 * keep the reply's first word too.
 */
export const TRANSIENT_REPLY_CODES: Readonly<Record<string, string>> = {
  OOM: 'maxmemory reached with a noeviction policy: the relay waits for memory to free up (trim the streams, raise maxmemory)',
  LOADING: 'the server is loading its data set after a restart',
  BUSY: 'the server is running a long script',
  TRYAGAIN: 'a cluster slot is being migrated',
  CLUSTERDOWN: 'the cluster is down',
  MASTERDOWN: 'the replica lost its primary',
  READONLY: 'the URL points at a replica: use the primary',
  NOREPLICAS: 'fewer replicas than min-replicas-to-write are connected',
  MOVED: 'the URL points at a Redis Cluster node: the sink supports a single node or a primary only',
  ASK: 'the URL points at a Redis Cluster node: the sink supports a single node or a primary only',
  NOSCRIPT: "the dedup script is not in the server's script cache (it is loaded again)",
  NOAUTH: 'the server needs a password: put it in REDIS_URL',
  WRONGPASS: 'the user or password of REDIS_URL is refused',
  NOPERM: "the relay's user may not run a command it needs (EVALSHA, SCRIPT, XADD, SET, EXISTS, INFO, WAIT)",
};

const CODE = /^([A-Z][A-Z_]+)\b/;
/** Redis 6 wraps a redis.call error: "ERR Error running script (call to f_…): @user_script:1: WRONGTYPE …". */
const WRAPPED = /:\s*([A-Z][A-Z_]+)\s[^:]*$/;

/** The error code of a Redis error reply's message, e.g. 'WRONGTYPE'; null when none. */
export function replyCode(message: string): string | null {
  const first = CODE.exec(message)?.[1] ?? null;
  if (first !== 'ERR') return first;
  const inner = WRAPPED.exec(message)?.[1];
  return inner && (PERMANENT_REPLY_CODES[inner] || TRANSIENT_REPLY_CODES[inner]) ? inner : first;
}

interface RedisLikeError {
  name?: string;
  message?: string;
  code?: unknown;
  cause?: unknown;
}

function* chain(e: unknown, depth = 0): Generator<RedisLikeError> {
  if (!e || typeof e !== 'object' || depth > 8) return;
  const r = e as RedisLikeError;
  yield r;
  yield* chain(r.cause, depth + 1);
}

export function classifyRedisError(e: unknown): Classified {
  const message = e instanceof Error ? e.message : String(e);
  for (const r of chain(e)) {
    if (r instanceof RedisSinkError) {
      const c = REDIS_SINK_CODES[r.code];
      return {
        class: c.permanent ? 'permanent' : 'transient',
        reason: r.code,
        message: r.message,
        ...(c.destinationWide ? { destinationWide: true } : {}),
      };
    }
    if (r.name === 'ReplyError' && r.message) {
      const code = replyCode(r.message);
      const p = code ? PERMANENT_REPLY_CODES[code] : undefined;
      if (p)
        return {
          class: 'permanent',
          reason: code!,
          message: `${p.why}: ${r.message}`,
          ...(p.destinationWide ? { destinationWide: true } : {}),
        };
      if (code && TRANSIENT_REPLY_CODES[code])
        return { class: 'transient', reason: code, message: `${TRANSIENT_REPLY_CODES[code]}: ${r.message}` };
      return { class: 'transient', reason: code ?? 'ReplyError', message };
    }
  }
  // Transient: connection refused or closed (ECONNREFUSED, "Connection is closed."), "Command
  // timed out", MaxRetriesPerRequestError, anything unknown.
  let reason = 'UNKNOWN';
  for (const r of chain(e)) {
    if (typeof r.code === 'string') {
      reason = r.code;
      break;
    }
    if (/timed out/i.test(r.message ?? '')) {
      reason = 'TIMEOUT';
      break;
    }
    if (r.name && r.name !== 'Error') {
      reason = r.name;
      break;
    }
    if (/connection is closed|stream isn't writeable/i.test(r.message ?? '')) {
      reason = 'CONNECTION_CLOSED';
      break;
    }
  }
  return { class: 'transient', reason, message };
}
