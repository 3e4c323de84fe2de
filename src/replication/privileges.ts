import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import { SqlState } from '../store/pg-errors.ts';
import { sqlName } from '../store/sql-ident.ts';

/**
 * What each role needs (docs/deployment.md, "Roles: least privilege"), and how a missing
 * privilege becomes a configuration error (exit 78) whose fix line is the GRANT to run.
 */

/** The relay's use of the outbox table: read rows, record outcomes, prune (DELETE, unless --no-prune). */
export function relayTablePrivileges(prune: boolean | undefined): string[] {
  return prune === false ? ['SELECT', 'UPDATE'] : ['SELECT', 'UPDATE', 'DELETE'];
}

/**
 * The relay updates its state row, which `migrate` inserts for its --slot; INSERT is needed only
 * for a slot migrate did not see (then the relay inserts the row itself).
 */
export const RELAY_STATE_PRIVILEGES = ['SELECT', 'UPDATE'];

export function grantOn(privileges: string[], object: string, role: string): string {
  return `GRANT ${privileges.join(', ')} ON ${object} TO ${sqlName(role)};`;
}

/** SQLSTATEs of a refused privilege: insufficient_privilege, invalid_grant_operation. */
const PRIVILEGE_SQLSTATE = new Set<string>([
  SqlState.INSUFFICIENT_PRIVILEGE,
  SqlState.INVALID_GRANT_OPERATION,
]);

/**
 * A privilege error from any statement (the relay's or an operator command's) as
 * INSUFFICIENT_PRIVILEGE with the GRANT that fixes it; null when `e` is something else.
 * The server names the object, not the privilege, so the fix names what the roles of
 * docs/deployment.md get on that object.
 */
export function privilegeError(e: unknown, role = '<role>'): RelayError | null {
  const code = (e as { code?: string }).code;
  const msg = errorMessage(e);
  if (!code || !PRIVILEGE_SQLSTATE.has(code)) return null;
  const r = sqlName(role);
  let fix: string;
  const object =
    /permission denied for (table|relation|view|schema|sequence|function|database) "?([^"\s]+)"?/.exec(msg);
  if (/replication|WAL sender|walsender/i.test(msg)) {
    fix = `ALTER ROLE ${r} WITH REPLICATION; -- (on RDS: GRANT rds_replication TO ${r})`;
  } else if (object?.[1] === 'schema') {
    fix = `GRANT USAGE ON SCHEMA ${sqlName(object[2]!)} TO ${r};`;
  } else if (object && /^(table|relation|view)$/.test(object[1]!)) {
    const name = object[2]!;
    fix = name.endsWith('_with_status')
      ? `GRANT SELECT ON ${sqlName(name)} TO ${r}; -- the truthful status of each row (docs/outbox-table.md), with SELECT on the outbox table and its _relay_progress`
      : /_relay_(state|progress)$/.test(name)
        ? `GRANT SELECT, UPDATE ON ${sqlName(name)} TO ${r}; -- and run \`outbox-relay migrate --slot <slot>\`, which inserts the slot's row (or GRANT INSERT too)`
        : `GRANT SELECT, UPDATE, DELETE ON ${sqlName(name)} TO ${r}; -- the relay's role (DELETE: retention); an operator's role needs SELECT, UPDATE, INSERT`;
  } else {
    fix = `grant ${r} what the message names (docs/deployment.md, "Roles: least privilege").`;
  }
  return new RelayError(ErrorCode.INSUFFICIENT_PRIVILEGE, `permission denied: ${msg}`, { cause: e, fix });
}
