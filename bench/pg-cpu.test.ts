import { describe, expect, it } from 'vitest';
import { processKind } from './pg-cpu.ts';

describe('processKind', () => {
  it('names a background process by its kind, without database or cluster names', () => {
    expect(processKind('postgres: autovacuum worker bench')).toBe('autovacuum worker');
    expect(processKind('postgres: autovacuum launcher ')).toBe('autovacuum launcher');
    expect(processKind('postgres: walwriter ')).toBe('walwriter');
    expect(processKind('postgres: 15/main: checkpointer ')).toBe('checkpointer');
    expect(processKind('postgres: logical replication launcher ')).toBe('logical replication');
    expect(processKind('postgres: background writer ')).toBe('background writer');
  });
});
