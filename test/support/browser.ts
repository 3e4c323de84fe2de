import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { fastFailureArgs } from './relay.ts';

/** Debian's Chromium (`apt-get install chromium`): the console's browser tests drive it with playwright-core. */
export const CHROMIUM = '/usr/bin/chromium';

/** A headless Chromium for one test file, quiet (no updates, sync or first-run work on the shared cores). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/**
 * The relay flags of a console test: the console on, its token in a 0600 file, and a failure
 * lifecycle fast enough to watch — one retry, then dead, so only an operator brings an event back.
 */
export function consoleRelayArgs(token: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'console-test-'));
  writeFileSync(join(dir, 'token'), `${token}\n`, { mode: 0o600 });
  return ['--console', '--console-token-file', join(dir, 'token'), ...fastFailureArgs(200)];
}
