/**
 * One snapshot, one verdict (issue 37): the console's overview, loaded as a new user would right
 * after the relay started streaming, shows one answer — the health verdict agrees with the relay
 * and slot cards beside it — and /readyz's body carries the same verdict. Before, the relay read
 * the verdict every 15 s and its first reading ran before streaming began, so for up to 15 s the
 * page said "UNHEALTHY — slot … is not active: no relay is streaming from it; no relay has
 * recorded its state" above cards saying "Relay: active", "Slot active: yes". Now the relay's own
 * state changes are read into the verdict at once, and the page takes the verdict and the slot
 * card from one reading that has every state change before it.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { consoleRelayArgs, launchChromium } from '../support/browser.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { migrateDb, type RelayProcess, spawnRelayWithHttp } from '../support/relay.ts';

const TOKEN = 'console-verdict-token-0123456789abcdef';
/** Findings that say no relay streams, or none has recorded its state. */
const NOT_STREAMING = ['slot_inactive', 'relay_not_recorded', 'relay_not_running', 'relay_stopped'];

const db = useTestDatabase();
let browser: Browser;
let relay: RelayProcess | null = null;

beforeAll(async () => {
  await migrateDb(db);
  browser = await launchChromium();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  relay?.kill('SIGTERM');
  await relay?.exited;
});

it('the overview right after streaming began: the verdict agrees with the relay and slot cards, and /readyz says the same', async () => {
  const r = await spawnRelayWithHttp(db, 'stdout', consoleRelayArgs(TOKEN));
  relay = r.relay;
  const base = `http://127.0.0.1:${r.port}`;
  const page = await (await browser.newContext()).newPage();

  // /readyz answers 200 from the moment the relay streams.
  await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, {
    timeoutMs: 60_000,
    intervalMs: 10,
    message: 'the relay streaming (/readyz 200)',
  });
  const streamingAt = Date.now();
  await page.goto(`${base}/console/`);
  const loadedWithinMs = Date.now() - streamingAt;

  const relayState = await page.getByTestId('relay-state').textContent();
  const slotActive = await page.getByTestId('slot-active').textContent();
  const verdict = await page.getByTestId('verdict').getAttribute('data-verdict');
  const findings = await page
    .locator('[data-problem]')
    .evaluateAll((els) =>
      els.map((e) => `${e.getAttribute('data-problem')}: ${e.querySelector('.problem')?.textContent ?? ''}`),
    );
  const said = { loadedWithinMs, relayState, slotActive, verdict, findings };
  // A precondition, not a timing target: the page must come inside the window the old code got
  // wrong (up to 15 s from a first reading taken before streaming), or the test could not fail.
  // A busy machine took 1.1 s here; 5 s keeps it well inside.
  expect(loadedWithinMs, JSON.stringify(said)).toBeLessThan(5000);
  expect(relayState, JSON.stringify(said)).toBe('active');
  expect(slotActive, JSON.stringify(said)).toMatch(/^yes \(pid \d+\)$/);
  // No contradiction: nothing in the verdict says that no relay streams.
  expect(
    findings.filter((f) => NOT_STREAMING.some((id) => f.startsWith(`${id}:`))),
    JSON.stringify(said),
  ).toEqual([]);
  expect(verdict, JSON.stringify(said)).toBe('healthy');

  // /readyz's body carries the same verdict (the one outbox_health shows).
  const body = (await (await fetch(`${base}/readyz`)).json()) as {
    state: string;
    health: { verdict: string; findings: { id: string }[] };
  };
  expect(body.state).toBe('streaming');
  expect(body.health.verdict, JSON.stringify(body)).toBe('healthy');
  const metrics = await (await fetch(`${base}/metrics`)).text();
  expect(metrics).toMatch(/^outbox_health\{verdict="healthy"\} 1$/m);
});
