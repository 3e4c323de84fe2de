import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../errors.ts';
import { sqlName } from '../store/sql-ident.ts';
import { grantOn, privilegeError, relayTablePrivileges } from './privileges.ts';

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('privilegeError', () => {
  it('is null for anything but a refused privilege', () => {
    expect(privilegeError(pgError('42P01', 'relation "x" does not exist'))).toBeNull();
    expect(privilegeError(new Error('permission denied for table outbox'))).toBeNull();
  });

  it.each([
    ['permission denied for table outbox', 'GRANT SELECT, UPDATE, DELETE ON outbox TO relay;'],
    [
      'permission denied for table outbox_relay_state',
      'GRANT SELECT, UPDATE ON outbox_relay_state TO relay;',
    ],
    ['permission denied for schema app', 'GRANT USAGE ON SCHEMA app TO relay;'],
    [
      'permission denied to start WAL sender',
      'ALTER ROLE relay WITH REPLICATION; -- (on RDS: GRANT rds_replication TO relay)',
    ],
    [
      'must be superuser or replication role to use replication slots',
      'ALTER ROLE relay WITH REPLICATION; -- (on RDS: GRANT rds_replication TO relay)',
    ],
  ])('42501 "%s" → INSUFFICIENT_PRIVILEGE (exit 78) fixed by %s', (message, grant) => {
    const e = privilegeError(pgError('42501', message), 'relay')!;
    expect(e.code).toBe(ErrorCode.INSUFFICIENT_PRIVILEGE);
    expect(e.retriable).toBe(false);
    expect(e.explanation).toContain(`fix: ${grant}`);
  });
});

describe('grants', () => {
  it('DELETE is needed only when pruning', () => {
    expect(relayTablePrivileges(undefined)).toEqual(['SELECT', 'UPDATE', 'DELETE']);
    expect(relayTablePrivileges(false)).toEqual(['SELECT', 'UPDATE']);
  });

  it('quotes names only when needed', () => {
    expect(sqlName('public', 'outbox')).toBe('public.outbox');
    expect(sqlName('My Schema', 'out"box')).toBe('"My Schema"."out""box"');
    expect(grantOn(['DELETE'], sqlName('public', 'outbox'), 'Relay')).toBe(
      'GRANT DELETE ON public.outbox TO "Relay";',
    );
  });
});
