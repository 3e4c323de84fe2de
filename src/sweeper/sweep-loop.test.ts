import { describe, expect, it } from 'vitest';
import { RelayError } from '../errors.ts';
import { silentLogger } from '../observability/logger.ts';
import { SweepLoop } from './sweep-loop.ts';

function recordingLogger() {
  const warnings: string[] = [];
  const log = silentLogger();
  log.warn = ((_o: unknown, msg: string) => {
    warnings.push(msg);
  }) as unknown as typeof log.warn;
  return { log, warnings };
}

describe('SweepLoop', () => {
  it('goes on after a failed round (logged unless quiet), and stop() waits for the round in progress', async () => {
    const { log, warnings } = recordingLogger();
    let rounds = 0;
    let inRound = false;
    const loop = new SweepLoop(
      async () => {
        inRound = true;
        rounds++;
        await new Promise((r) => setTimeout(r, 5));
        inRound = false;
        if (rounds === 1) throw new Error('broker down');
        if (rounds === 2) throw new Error('quiet one');
      },
      { intervalMs: 1, log, failed: 'round failed', quiet: (e) => (e as Error).message === 'quiet one' },
    );
    loop.start();
    loop.start(); // one loop only
    while (rounds < 4) await new Promise((r) => setTimeout(r, 1));
    await loop.stop();
    expect(inRound).toBe(false);
    expect(warnings).toEqual(['round failed']);
    const after = rounds;
    await new Promise((r) => setTimeout(r, 20));
    expect(rounds).toBe(after);
  });

  it('ends on a RelayError that is not retriable and hands it to onFatal', async () => {
    const fatal: RelayError[] = [];
    let rounds = 0;
    const loop = new SweepLoop(
      async () => {
        rounds++;
        throw new RelayError('SLOT_INVALIDATED', 'the slot was invalidated');
      },
      { intervalMs: 1, log: silentLogger(), failed: 'x', onFatal: (e) => fatal.push(e) },
    );
    loop.start();
    while (fatal.length === 0) await new Promise((r) => setTimeout(r, 1));
    await loop.stop();
    expect(rounds).toBe(1);
    expect(fatal[0]!.message).toMatch(/invalidated/);
  });
});
