import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SCANNED, STATUSES, sqlStatuses, UNHEALTHY } from './statuses.ts';

describe('status sets', () => {
  it('spells a set as SQL the way the migrations do, so queries match the partial indexes', () => {
    const ddl = readFileSync(new URL('../../sql/000001_outbox.sql', import.meta.url), 'utf8');
    expect(ddl).toContain(`WHERE status IN ${sqlStatuses(UNHEALTHY)};`);
    expect(ddl).toContain(`CHECK (status IN ${sqlStatuses(STATUSES)})`);
  });

  it('SCANNED is every status outside the unhealthy index', () => {
    expect(SCANNED).toEqual(['pending', 'published', 'discarded']);
  });
});
