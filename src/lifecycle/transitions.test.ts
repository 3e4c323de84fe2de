import { describe, expect, it } from 'vitest';
import * as outboxStore from './outbox-store.ts';
import * as replay from './replay.ts';
import * as retention from './retention.ts';
import { STATUSES } from './statuses.ts';
import * as transitions from './transitions.ts';
import { TRANSITIONS } from './transitions.ts';

const modules: Record<string, Record<string, unknown>> = {
  'outbox-store.ts': outboxStore,
  'replay.ts': replay,
  'retention.ts': retention,
  'transitions.ts': transitions,
};

describe('TRANSITIONS', () => {
  it('names statements that exist, between known statuses', () => {
    for (const t of TRANSITIONS) {
      if (t.from !== 'new') expect(STATUSES).toContain(t.from);
      if (t.to !== 'deleted') expect(STATUSES).toContain(t.to);
      if (t.statement === '') continue;
      const [file, name] = t.statement.split('#') as [string, string];
      const [exported, method] = name.split('.') as [string, string | undefined];
      const value = modules[file]?.[exported] as { prototype?: Record<string, unknown> } | undefined;
      expect(value, t.statement).toBeTypeOf('function');
      if (method) expect(value!.prototype![method], t.statement).toBeTypeOf('function');
    }
  });

  it('lets no status go back to pending', () => {
    expect(TRANSITIONS.filter((t) => t.to === 'pending' && t.from !== 'new')).toEqual([]);
  });
});
