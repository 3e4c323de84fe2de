import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../observability/logger.ts';
import { installKafkajsPatches } from './install.ts';
import { KAFKAJS_INTERNALS, kafkajsVersion, missingInternals, TESTED_KAFKAJS } from './internals.ts';

const require = createRequire(import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as {
  dependencies: Record<string, string>;
};

/**
 * The kafkajs internals the relay's patches rely on, checked against the kafkajs installed — the
 * pinned one. An upgrade that moves one fails here first (README.md, "Checking an upgrade").
 */
describe('kafkajs internals', () => {
  it('package.json pins kafkajs exactly, to the version the patches were tested with, and it is the one installed', () => {
    expect(pkg.dependencies.kafkajs).toBe(TESTED_KAFKAJS);
    expect(kafkajsVersion()).toBe(TESTED_KAFKAJS);
  });

  for (const [patch, checks] of Object.entries(KAFKAJS_INTERNALS))
    for (const c of checks)
      it(`${patch}: ${c.what}`, () => {
        expect(c.ok()).toBe(true);
      });

  it('every patch is active, and the start-up report says so', () => {
    const r = installKafkajsPatches(silentLogger());
    expect(r.inactive).toEqual([]);
    expect([...r.active].sort()).toEqual(Object.keys(KAFKAJS_INTERNALS).sort());
    expect(r.Client).not.toBeNull();
  });

  it('a changed internal is found: a method gone from RequestQueue turns its patch off', () => {
    const proto = require('kafkajs/src/network/requestQueue/index.js').prototype;
    const saved = proto.checkPendingRequests;
    delete proto.checkPendingRequests;
    try {
      expect(missingInternals('request-queue')).toEqual([
        'RequestQueue (network/requestQueue/index.js) has scheduleCheckPendingRequests, checkPendingRequests',
      ]);
    } finally {
      proto.checkPendingRequests = saved;
    }
    expect(missingInternals('request-queue')).toEqual([]);
  });
});
