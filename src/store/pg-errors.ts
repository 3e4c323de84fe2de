/**
 * PostgreSQL's errors as the relay treats them: the SQLSTATEs it handles specially, by name, and
 * the class of each (the Kafka counterpart is sinks/kafka/kafka-errors.ts). Pure and table-driven;
 * pg-errors.test.ts checks every entry, and that no file outside this one spells a SQLSTATE.
 *
 *  - transient: waiting can cure it (connection lost, server shutting down, resources, lock or
 *    serialization conflicts, an object in use): back off and retry, confirm nothing past it;
 *  - permanent: for the row or statement that met it — the same statement fails the same way,
 *    but the relay can record it and go on (54000 makes a failure 'discarded');
 *  - fatal: the relay cannot go on until an operator changes something (credentials, the
 *    database name, a GRANT, a migration): ends with the remediation below.
 */
export type PgErrorClass = 'transient' | 'permanent' | 'fatal';

/** The SQLSTATEs the relay names (PostgreSQL's appendix A "PostgreSQL Error Codes"). */
export const SqlState = {
  /** 0LP01: a GRANT the role may not make. */
  INVALID_GRANT_OPERATION: '0LP01',
  /** 22021: bytes not valid in the encoding (a SQL_ASCII database's non-UTF-8 byte, sent as UTF-8). */
  CHARACTER_NOT_IN_REPERTOIRE: '22021',
  /** 25P01: a statement that needs a transaction ran outside one (the SDK's check). */
  NO_ACTIVE_SQL_TRANSACTION: '25P01',
  /** 25P02: the transaction already failed; every statement is refused until ROLLBACK. */
  IN_FAILED_SQL_TRANSACTION: '25P02',
  /** 28000: no pg_hba.conf entry, or the role may not log in. */
  INVALID_AUTHORIZATION_SPECIFICATION: '28000',
  /** 28P01: wrong password. */
  INVALID_PASSWORD: '28P01',
  /** 3D000: the database does not exist. */
  INVALID_CATALOG_NAME: '3D000',
  /** 42501: the role lacks a privilege. */
  INSUFFICIENT_PRIVILEGE: '42501',
  /** 42704: e.g. the replication slot does not exist (dropped under the stream). */
  UNDEFINED_OBJECT: '42704',
  /** 42710: e.g. a slot created concurrently (the statement's goal holds). */
  DUPLICATE_OBJECT: '42710',
  /** 42P01: a table is missing (not migrated yet). */
  UNDEFINED_TABLE: '42P01',
  /** 53400: e.g. every max_replication_slots slot is in use. */
  CONFIGURATION_LIMIT_EXCEEDED: '53400',
  /** 54000: e.g. "index row requires 24040 bytes, maximum size is 8191". */
  PROGRAM_LIMIT_EXCEEDED: '54000',
  /** 55006: e.g. the slot is active for another PID (another relay streams from it). */
  OBJECT_IN_USE: '55006',
  /** 55P03: a lock that could not be taken at once. */
  LOCK_NOT_AVAILABLE: '55P03',
} as const;
export type SqlState = (typeof SqlState)[keyof typeof SqlState];

/** Whole SQLSTATE classes (the first two characters) the relay treats alike. */
export const SqlStateClass = {
  CONNECTION_EXCEPTION: '08',
  TRANSACTION_ROLLBACK: '40',
  INSUFFICIENT_RESOURCES: '53',
  OPERATOR_INTERVENTION: '57',
  SYSTEM_ERROR: '58',
} as const;

export interface PgErrorEntry {
  class: PgErrorClass;
  /** What to do, for what an operator can meet. */
  remediation?: string;
}

/**
 * 42P01's fix, the command that creates the relay's tables: with a preset's flags (its
 * `cliFlags`, ` --compat debezium`) where the caller knows the preset (the console's 503).
 */
export function migrateRemedy(cliFlags = ''): string {
  return `Run \`outbox-relay migrate${cliFlags}\` as the table's owner (docs/upgrading.md).`;
}

/** Each named SQLSTATE and class: its class, and the fix where an operator must act. */
export const PG_ERRORS: Readonly<Record<string, PgErrorEntry>> = {
  [SqlStateClass.CONNECTION_EXCEPTION]: { class: 'transient' },
  [SqlStateClass.TRANSACTION_ROLLBACK]: { class: 'transient' },
  [SqlStateClass.INSUFFICIENT_RESOURCES]: { class: 'transient' },
  // Shutdown, a terminated backend, cannot connect now, a cancelled statement.
  [SqlStateClass.OPERATOR_INTERVENTION]: { class: 'transient' },
  [SqlStateClass.SYSTEM_ERROR]: { class: 'transient' },
  [SqlState.LOCK_NOT_AVAILABLE]: { class: 'transient' },
  [SqlState.OBJECT_IN_USE]: {
    class: 'transient',
    remediation:
      'Another process (most likely another relay) streams from the slot; the relay waits and takes over when it stops.',
  },
  [SqlState.CONFIGURATION_LIMIT_EXCEEDED]: {
    class: 'transient',
    remediation:
      'Creating a slot: drop unused slots or raise max_replication_slots (preflight reports SLOT_LIMIT_REACHED).',
  },
  [SqlState.PROGRAM_LIMIT_EXCEEDED]: {
    class: 'permanent',
    remediation:
      "A row whose aggregate columns are too long for the index of failed/dead/parked rows: recorded 'discarded' with the reason; correct the row and re-insert it (`outbox-relay replay --event-id …`).",
  },
  [SqlState.CHARACTER_NOT_IN_REPERTOIRE]: {
    class: 'permanent',
    remediation:
      'The stream cannot convert a row to the client encoding (a SQL_ASCII database holding non-UTF-8 bytes): see docs/operations.md#poison-position.',
  },
  [SqlState.UNDEFINED_OBJECT]: { class: 'permanent' },
  [SqlState.DUPLICATE_OBJECT]: { class: 'permanent' },
  [SqlState.NO_ACTIVE_SQL_TRANSACTION]: { class: 'permanent' },
  [SqlState.IN_FAILED_SQL_TRANSACTION]: {
    class: 'permanent',
    remediation: 'ROLLBACK and retry the whole unit of work.',
  },
  [SqlState.UNDEFINED_TABLE]: { class: 'fatal', remediation: migrateRemedy() },
  [SqlState.INSUFFICIENT_PRIVILEGE]: {
    class: 'fatal',
    remediation: 'Grant the missing privilege to the role (docs/deployment.md, "Roles: least privilege").',
  },
  [SqlState.INVALID_GRANT_OPERATION]: {
    class: 'fatal',
    remediation: 'Grant the missing privilege to the role (docs/deployment.md, "Roles: least privilege").',
  },
  [SqlState.INVALID_PASSWORD]: { class: 'fatal', remediation: 'Fix the credentials in --database-url.' },
  [SqlState.INVALID_AUTHORIZATION_SPECIFICATION]: {
    class: 'fatal',
    remediation: 'Allow the role to connect (pg_hba.conf, LOGIN) or fix --database-url.',
  },
  [SqlState.INVALID_CATALOG_NAME]: {
    class: 'fatal',
    remediation: 'The database in --database-url does not exist: fix the URL.',
  },
};

/** The table's entry for a SQLSTATE: its own, else its class's; undefined = not named here. */
export function pgErrorOf(sqlstate: string | undefined): PgErrorEntry | undefined {
  if (sqlstate === undefined) return undefined;
  return PG_ERRORS[sqlstate] ?? PG_ERRORS[sqlstate.slice(0, 2)];
}

/** Whether waiting can cure the SQLSTATE (see PG_ERRORS). */
export function isTransientSqlState(sqlstate: string | undefined): boolean {
  return pgErrorOf(sqlstate)?.class === 'transient';
}

/** The driver's error code: a SQLSTATE (pg sets `code`), or a Node system error's (ECONNREFUSED). */
export function codeOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The SQLSTATE of a driver error, if it has one. */
export function sqlStateOf(e: unknown): string | undefined {
  const code = codeOf(e);
  return code !== undefined && isSqlState(code) ? code : undefined;
}

export function isSqlState(code: string): boolean {
  return /^[0-9A-Z]{5}$/.test(code);
}
