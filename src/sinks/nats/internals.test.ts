import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { missingNatsInternals, NATS_INTERNALS, natsVersion, TESTED_NATS } from './internals.ts';

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
  dependencies: Record<string, string>;
};

/**
 * The nats.js internals the NATS sink's fast paths rely on, checked against the installed — the
 * pinned — packages. An upgrade that moves one fails here first (README.md, "Checking an upgrade").
 */
describe('nats.js internals', () => {
  for (const [name, version] of Object.entries(TESTED_NATS))
    it(`package.json pins ${name} exactly, to ${version}, and it is the one installed`, () => {
      expect(pkg.dependencies[name]).toBe(version);
      expect(natsVersion(name as keyof typeof TESTED_NATS)).toBe(version);
    });

  for (const [path, checks] of Object.entries(NATS_INTERNALS))
    for (const c of checks)
      it(`${path}: ${c.what}`, () => {
        expect(c.ok()).toBe(true);
      });

  it('a changed internal is found: a method gone from MsgHdrsImpl turns pub-acks off', async () => {
    const { MsgHdrsImpl } = await import('@nats-io/transport-node');
    const proto = MsgHdrsImpl.prototype as unknown as Record<string, unknown>;
    const saved = proto.encode;
    delete proto.encode;
    try {
      expect(missingNatsInternals('pub-acks')).toEqual(['MsgHdrsImpl.prototype has encode']);
    } finally {
      proto.encode = saved;
    }
    expect(missingNatsInternals('pub-acks')).toEqual([]);
  });
});
