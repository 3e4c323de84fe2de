import { type Browser, chromium } from 'playwright-core';

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
