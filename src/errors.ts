/**
 * One error model: every error the relay raises on purpose has a stable code,
 * says whether retrying can help, keeps its cause, and (for codes an operator
 * can hit) tells how to fix it.
 */
export const ErrorCode = {
  CONFIG_INVALID: 'CONFIG_INVALID',
  WAL_LEVEL_NOT_LOGICAL: 'WAL_LEVEL_NOT_LOGICAL',
  ROLE_NOT_REPLICATION: 'ROLE_NOT_REPLICATION',
  OUTBOX_TABLE_MISSING: 'OUTBOX_TABLE_MISSING',
  PUBLICATION_MISSING: 'PUBLICATION_MISSING',
  PUBLICATION_MISMATCH: 'PUBLICATION_MISMATCH',
  PARTITIONS_MISSING: 'PARTITIONS_MISSING',
  SLOT_WRONG_PLUGIN: 'SLOT_WRONG_PLUGIN',
  SLOT_OTHER_DATABASE: 'SLOT_OTHER_DATABASE',
  SLOT_LIMIT_REACHED: 'SLOT_LIMIT_REACHED',
  SLOT_ACTIVE_ELSEWHERE: 'SLOT_ACTIVE_ELSEWHERE',
  SLOT_INVALIDATED: 'SLOT_INVALIDATED',
  DATABASE_UNAVAILABLE: 'DATABASE_UNAVAILABLE',
  BROKER_UNAVAILABLE: 'BROKER_UNAVAILABLE',
  BROKER_REJECTED: 'BROKER_REJECTED',
  PROTOCOL_VIOLATION: 'PROTOCOL_VIOLATION',
  MIGRATION_FAILED: 'MIGRATION_FAILED',
  INSUFFICIENT_PRIVILEGE: 'INSUFFICIENT_PRIVILEGE',
  RELAY_STATE_MISSING: 'RELAY_STATE_MISSING',
  POISON_POSITION: 'POISON_POSITION',
  KAFKA_TOPICS_NOT_READY: 'KAFKA_TOPICS_NOT_READY',
  PRODUCER_FENCED: 'PRODUCER_FENCED',
  TIMELINE_CHANGED: 'TIMELINE_CHANGED',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** What an operator should do, for the codes an operator can hit. */
export const remediation: Partial<Record<ErrorCode, string>> = {
  CONFIG_INVALID: 'Fix the named option (see `outbox-relay run --help` or docs/configuration.md).',
  WAL_LEVEL_NOT_LOGICAL:
    "Run `ALTER SYSTEM SET wal_level = 'logical'` as a superuser and restart PostgreSQL (on managed services set the rds.logical_replication / cloudsql.logical_decoding flag).",
  ROLE_NOT_REPLICATION:
    'Grant it: `ALTER ROLE <role> WITH REPLICATION` (see docs/deployment.md for the least-privilege role).',
  OUTBOX_TABLE_MISSING: 'Run `outbox-relay migrate --database-url …` (or check --schema / --table).',
  PUBLICATION_MISSING:
    'Run `outbox-relay migrate --database-url …`, which creates it, or check --publication.',
  PUBLICATION_MISMATCH:
    "The publication must cover only the outbox table and only inserts: `ALTER PUBLICATION <pub> SET TABLE <schema>.outbox; ALTER PUBLICATION <pub> SET (publish = 'insert')`.",
  PARTITIONS_MISSING:
    'A partitioned outbox needs a partition for every created_at an insert writes: run `outbox-relay migrate` (it creates the current partition and --partition-premake after it), or keep a relay running (it creates them ahead; its role must own the table). docs/outbox-table.md#partitioning.',
  SLOT_WRONG_PLUGIN:
    'Choose another --slot name, or drop that slot if nothing else uses it (`outbox-relay slot drop` / pg_drop_replication_slot).',
  SLOT_OTHER_DATABASE:
    "Slot names are global to the PostgreSQL cluster and a slot belongs to one database: choose another --slot name for this database (nothing was changed on the other database's slot).",
  SLOT_LIMIT_REACHED:
    'Drop unused slots (SELECT slot_name, active FROM pg_replication_slots) or raise max_replication_slots and restart PostgreSQL.',
  SLOT_ACTIVE_ELSEWHERE:
    'Another process (most likely another relay) streams from this slot; this one waits and takes over when it stops.',
  SLOT_INVALIDATED:
    'PostgreSQL invalidated the slot (invalidation_reason in the message: wal_removed = it fell further behind than max_slot_wal_keep_size; idle_timeout = no relay streamed from it for longer than idle_replication_slot_timeout, PostgreSQL 18), or it was dropped: events committed since its last position may never be relayed by it. By default the relay recovers by itself (docs/operations.md#lost-slot); this stop means --no-slot-recovery is set: run without it, or Drop and recreate the slot (`outbox-relay slot drop`, then run), then replay the gap with `outbox-relay replay --since <time of last relayed event>`.',
  DATABASE_UNAVAILABLE: 'The relay retries by itself; check that PostgreSQL is up and reachable.',
  TIMELINE_CHANGED:
    'A standby was promoted (or another database answers at this address). Nothing to do: the relay drops the outcomes it observed on the old primary, starts over from the new one, and its table recovery publishes every event the new primary has not recorded (duplicates possible). Events of transactions the new primary never received were published anyway (phantoms) unless PostgreSQL 17+ synchronized_standby_slots holds decoding back: docs/managed-postgres.md#failover.',
  BROKER_UNAVAILABLE: 'The relay retries by itself; check the brokers and the network.',
  INSUFFICIENT_PRIVILEGE:
    'Grant the missing privilege to the role (docs/deployment.md, "Roles: least privilege"), then run `outbox-relay check` with that role.',
  POISON_POSITION:
    'The same stream error recurs at one WAL position: retrying cannot help. See docs/operations.md#poison-position for how to skip the transaction (pg_replication_slot_advance) and replay its rows, and what is lost if you do.',
  RELAY_STATE_MISSING:
    'Run `outbox-relay migrate --database-url …` as the schema owner: it creates the relay-state and progress tables.',
  KAFKA_TOPICS_NOT_READY:
    'Create the named topics with enough partitions (kafka-topics.sh --create / --alter --partitions, or run with --kafka-topics create), or lower --kafka-topic-partitions; `outbox-relay check` lists them (docs/kafka.md#topics).',
  PRODUCER_FENCED:
    "Exactly-once: another relay started a transactional producer with this relay's transactional id (same database and slot) and fenced this one, or wrote the slot's Kafka progress since. This relay stopped publishing and exited (75) without committing anything more; nothing is lost. If both were meant to run, one is a standby: restart this one and it waits for the leader lock (docs/delivery.md).",
};

export interface RelayErrorOptions {
  retriable?: boolean;
  cause?: unknown;
  details?: Record<string, unknown>;
  /** What to do, when it depends on the case (e.g. the exact GRANT); else remediation[code]. */
  fix?: string;
}

export class RelayError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly details: Record<string, unknown> | undefined;
  readonly fix: string | undefined;

  constructor(code: ErrorCode, message: string, opts: RelayErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'RelayError';
    this.code = code;
    this.retriable = opts.retriable ?? false;
    this.details = opts.details;
    this.fix = opts.fix;
  }

  /** The message followed by what to do about it. */
  get explanation(): string {
    const fix = this.fix ?? remediation[this.code];
    return fix ? `${this.message}\n  fix: ${fix}` : this.message;
  }
}

/**
 * How an error bears on the event or statement that met it, whatever the dependency (the Kafka
 * table sinks/kafka/kafka-errors.ts, the PostgreSQL table store/pg-errors.ts, the router's row checks):
 * permanent = retrying the same thing cannot succeed until someone changes it; transient = wait
 * and retry, never confirm past it.
 */
export type ErrorClass = 'permanent' | 'transient';

export interface Classified {
  class: ErrorClass;
  /** A stable name of the cause (a Kafka error type, a route check, a SQLSTATE's name). */
  reason: string;
  message: string;
  /**
   * The refusal is the destination's as a whole, not this event's (a Kafka topic missing or not
   * authorized, a NATS subject no stream takes, a RabbitMQ exchange missing): every event for the
   * same destination (Sink.destinationOf) gets the same answer. Set by each sink's error table,
   * on permanent refusals only; the stream then fails a one-destination batch at once instead of
   * sending each event alone (src/outcome/decide.ts).
   */
  destinationWide?: true;
  /**
   * Transient only: the destination said when to try again (an HTTP receiver's Retry-After);
   * the next attempt waits this long instead of the usual back-off (src/outcome/publish.ts).
   */
  retryAfterMs?: number;
}

export function isRelayError(e: unknown, code?: ErrorCode): e is RelayError {
  return e instanceof RelayError && (code === undefined || e.code === code);
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
