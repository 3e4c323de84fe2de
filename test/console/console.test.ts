/**
 * The operator console in a real browser (Debian's headless Chromium driven by playwright-core;
 * never a downloaded browser) against a real relay process, real PostgreSQL and the run's real
 * Kafka broker (auto-creation off). Every run takes a screenshot of each page, into .tmp/; with
 * UPDATE_SCREENSHOTS=1 into docs/console/*.png, the pictures of docs/console.md.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleRelayArgs, launchChromium } from '../support/browser.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, type RelayProcess, ROOT, spawnRelayWithHttp } from '../support/relay.ts';

const TOKEN = 'console-test-token-0123456789abcdef';
const SHOTS = join(ROOT, process.env.UPDATE_SCREENSHOTS ? 'docs/console' : '.tmp/console-screenshots');

const db = useTestDatabase();
let kafka: KafkaHarness;
let relay: RelayProcess;
let base: string;
let browser: Browser;

const ev = (type: string, id: string, seq: number) => ({
  aggregateType: type,
  aggregateId: id,
  eventType: `${type}Changed`,
  payload: JSON.stringify({ seq, id, note: 'hello <b>console</b>' }),
  headers: { source: 'console-test', seq: String(seq) },
});

async function statusOf(id: string): Promise<string> {
  return (await db.query<{ status: string }>('SELECT status FROM outbox WHERE id = $1', [id]))[0]!.status;
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  (page as Page & { problems: string[] }).problems = problems;
  return page;
}

/** Browser console errors (a CSP violation shows up here) of a page so far. */
const problemsOf = (page: Page) => (page as Page & { problems: string[] }).problems;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  await migrateDb(db);
  kafka = await startKafka();
  await kafka.createTopic('outbox.event.Good', 1);
  const r = await spawnRelayWithHttp(db, kafka, consoleRelayArgs(TOKEN));
  relay = r.relay;
  base = `http://127.0.0.1:${r.port}`;
  browser = await launchChromium();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  relay?.kill('SIGTERM');
  await relay?.exited;
  await kafka?.stop();
});

describe('operator console', () => {
  let head: string;
  let followers: string[];

  it('the overview leads with status’s verdict, its problems, what to do and the failing topic; then the relay state, the slot, and the failing topic’s events', async () => {
    // Missing: its topic does not exist (auto-creation off), so m-1's events fail; the first is
    // refused, the later ones of the aggregate are parked behind it (strict ordering).
    head = (await insertEvents(db.pool, [ev('Missing', 'm-1', 1)]))[0]!;
    await waitFor(async () => (await statusOf(head)) === 'dead', {
      timeoutMs: 30_000,
      message: 'the refused event is dead after its attempts',
    });
    followers = await insertEvents(db.pool, [ev('Missing', 'm-1', 2), ev('Missing', 'm-1', 3)]);
    await insertEvents(db.pool, [ev('Good', 'g-1', 1), ev('Good', 'g-1', 2)]);
    await waitFor(async () => (await Promise.all(followers.map(statusOf))).every((s) => s === 'parked'), {
      timeoutMs: 30_000,
      message: 'followers parked',
    });

    const page = await newPage();
    const res = await page.goto(`${base}/console/`);
    expect(res!.status()).toBe(200);
    const h = res!.headers();
    expect(h['content-security-policy']).toContain("default-src 'self'");
    expect(h['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(h['content-security-policy']).not.toContain('unsafe-inline');
    expect(h['x-content-type-options']).toBe('nosniff');
    expect(h['referrer-policy']).toBe('no-referrer');
    // The relay reads status's verdict every 15 s: reload until the dead event is in it.
    await waitFor(
      async () => {
        await page.reload();
        return (await page.getByTestId('verdict').getAttribute('data-verdict')) === 'unhealthy';
      },
      { timeoutMs: 40_000, message: 'the overview shows the unhealthy verdict' },
    );
    await expect(page.getByTestId('verdict-value').textContent()).resolves.toBe('unhealthy');
    const dead = page.locator('[data-problem=dead_events]');
    await expect(dead.locator('.problem').textContent()).resolves.toMatch(
      /^1 dead event\(s\) \(\S+outbox\.event\.Missing: UNKNOWN_TOPIC_OR_PARTITION\)/,
    );
    await expect(dead.getByTestId('failing-topic').allTextContents()).resolves.toEqual([
      kafka.topic('outbox.event.Missing'),
    ]);
    await expect(dead.locator('.fix').textContent()).resolves.toMatch(
      new RegExp(
        `What to do: \\S+outbox\\.event\\.Missing: create the topic: kafka-topics\\.sh .*--create --topic ${kafka.topic('outbox.event.Missing').replace(/\./g, '\\.')}`,
      ),
    );
    // The relay itself streams: its state card says so, beside the verdict that says what is wrong.
    await expect(page.getByTestId('relay-state').textContent()).resolves.toBe('active');
    const failedRow = page.locator('table.events tr', { hasText: 'Missing' });
    await expect(failedRow.first().textContent()).resolves.toMatch(/dead.*m-1.*UNKNOWN_TOPIC_OR_PARTITION/s);
    const counts = await page.getByTestId('counts').textContent();
    expect(counts).toMatch(/dead\s*1/);
    expect(counts).toMatch(/parked\s*2/);
    // The chart is server-rendered SVG.
    expect(await page.locator('svg.chart').count()).toBe(2);
    await shot(page, 'overview');
    expect(problemsOf(page)).toEqual([]);
  });

  it('the events list filters and pages; an event page shows its error, payload, headers and followers', async () => {
    const page = await newPage();
    await page.goto(`${base}/console/events?status=dead&status=parked&aggregate_type=Missing`);
    await expect(page.getByTestId('events-count').textContent()).resolves.toMatch(/^3 matching event/);
    await shot(page, 'events');
    await page.click(`a[href="/console/events/${head}"]`);
    await expect(page.getByTestId('last-error').textContent()).resolves.toMatch(
      /permanent\/UNKNOWN_TOPIC_OR_PARTITION/,
    );
    // What to do for its error class, naming its topic (ops/remedies.ts, the causes of kafka-errors.ts).
    await expect(page.getByTestId('remedy').textContent()).resolves.toContain(
      `topic does not exist (and auto-creation is off) (topic ${kafka.topic('outbox.event.Missing')})`,
    );
    await expect(page.getByTestId('remedy-fix').textContent()).resolves.toMatch(
      new RegExp(
        `^Create the topic: kafka-topics\\.sh .*--create --topic ${kafka.topic('outbox.event.Missing').replace(/\./g, '\\.')}`,
      ),
    );
    // Row content is escaped, never markup.
    await expect(page.getByTestId('payload').textContent()).resolves.toContain('hello <b>console</b>');
    expect(await page.locator('[data-testid=payload] b').count()).toBe(0);
    const followerLinks = page.locator('section', { hasText: 'Parked followers' }).locator('table.events a');
    await expect(followerLinks.allTextContents()).resolves.toEqual(followers);
    await shot(page, 'event');
    expect(problemsOf(page)).toEqual([]);
  });

  it('refuses a resend without the operator token (no login, forged form, wrong token)', async () => {
    const page = await newPage();
    await page.goto(`${base}/console/events/${head}`);
    await page.click('text=Resend…');
    await expect(page.getByTestId('preview-count').textContent()).resolves.toMatch(/would resend 1 event/);
    expect(await page.getByTestId('confirm').count()).toBe(0);
    await expect(page.locator('main').textContent()).resolves.toMatch(/log in/);
    // A hand-made POST (what a cross-site form would send) is refused: no session, no CSRF token.
    const forged = await page.request.post(`${base}/console/actions/apply`, {
      form: { action: 'resend', scope: 'id', id: head, expected: '1' },
    });
    expect(forged.status()).toBe(403);
    await page.goto(`${base}/console/login`);
    await page.fill('input[name=token]', 'not-the-token-at-all');
    await page.click('button:has-text("Log in")');
    await expect(page.locator('[role=alert]').textContent()).resolves.toMatch(/Wrong token/);
    expect(await statusOf(head)).toBe('dead');
    const html = await page.content();
    expect(html).not.toContain(TOKEN);
  });

  it('with the token, resend of the refused event after the topic is fixed publishes it and releases its followers in order', async () => {
    await kafka.createTopic('outbox.event.Missing', 1);
    // Still dead: nothing retries it by itself.
    await new Promise((r) => setTimeout(r, 1000));
    expect(await statusOf(head)).toBe('dead');

    const page = await newPage();
    await page.goto(`${base}/console/login`);
    await page.fill('input[name=token]', TOKEN);
    await page.click('button:has-text("Log in")');
    await page.waitForURL(`${base}/console/`);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'outbox_console_session')!;
    expect(cookie.httpOnly).toBe(true);
    expect(cookie.sameSite).toBe('Strict');
    expect(cookie.value).not.toContain(TOKEN);
    await page.goto(`${base}/console/events/${head}`);
    await page.click('text=Resend…');
    await expect(page.getByTestId('preview-count').textContent()).resolves.toMatch(
      /would resend 1 event\(s\)\. 2 parked follower/,
    );
    await shot(page, 'resend-preview');
    await page.check('input[name=reset_attempts]');
    await page.getByTestId('confirm').click();
    await expect(page.getByTestId('result').textContent()).resolves.toMatch(/1 event\(s\) due again now/);

    await waitFor(
      async () => (await Promise.all([head, ...followers].map(statusOf))).every((s) => s === 'published'),
      { timeoutMs: 30_000, message: 'head and followers published' },
    );
    const records = await kafka.readAll('outbox.event.Missing');
    expect(records.map((r) => r.key?.toString())).toEqual(['m-1', 'm-1', 'm-1']);
    expect(records.map((r) => JSON.parse(r.value!.toString()).seq)).toEqual([1, 2, 3]);
    // Audited exactly like the CLI's resend, plus who in the console did it.
    await relay.waitForLog(/"audit":true,"action":"resend"/);
    const line = relay
      .logs()
      .split('\n')
      .find((l) => l.includes('"audit":true') && l.includes('"action":"resend"'))!;
    expect(JSON.parse(line)).toMatchObject({ ids: [head], resetAttempts: true, rows: 1, via: 'console' });
    expect(line).not.toContain(TOKEN);
  });

  it('discard asks for confirmation before it changes anything', async () => {
    const [doomed] = await insertEvents(db.pool, [ev('Nowhere', 'n-1', 1)]);
    await waitFor(async () => (await statusOf(doomed!)) === 'dead', { timeoutMs: 30_000, message: 'dead' });
    const page = await newPage();
    await page.goto(`${base}/console/login`);
    await page.fill('input[name=token]', TOKEN);
    await page.click('button:has-text("Log in")');
    await page.waitForURL(`${base}/console/`);
    await page.goto(`${base}/console/events/${doomed}`);
    await page.click('text=Discard…');
    await expect(page.locator('h1').textContent()).resolves.toBe(`Discard event ${doomed}?`);
    await expect(page.getByTestId('confirm').textContent()).resolves.toMatch(/Yes, discard 1 event/);
    await shot(page, 'discard-confirm');
    expect(await statusOf(doomed!)).toBe('dead');
    await page.getByTestId('confirm').click();
    await expect(page.getByTestId('result').textContent()).resolves.toMatch(/1 event\(s\) discarded/);
    expect(await statusOf(doomed!)).toBe('discarded');
  });

  it('a filtered set: the preview counts and lists it; the confirmed discard never touches an event that matched later', async () => {
    const first = await insertEvents(db.pool, [ev('Bulk', 'b-1', 1), ev('Bulk', 'b-2', 1)]);
    await waitFor(async () => (await Promise.all(first.map(statusOf))).every((x) => x === 'dead'), {
      timeoutMs: 30_000,
      message: 'both dead',
    });
    const page = await newPage();
    await page.goto(`${base}/console/login`);
    await page.fill('input[name=token]', TOKEN);
    await page.click('button:has-text("Log in")');
    await page.waitForURL(`${base}/console/`);
    await page.goto(`${base}/console/events?status=dead&aggregate_type=Bulk`);
    await page.click('text=Discard all…');
    await expect(page.getByTestId('preview-count').textContent()).resolves.toMatch(/would discard 2 event/);
    expect(await page.locator('table.events tbody tr').count()).toBe(2);
    // A third matching event appears between the preview and the confirmation.
    const [late] = await insertEvents(db.pool, [ev('Bulk', 'b-3', 1)]);
    await waitFor(async () => (await statusOf(late!)) === 'dead', {
      timeoutMs: 30_000,
      message: 'late dead',
    });
    await page.getByTestId('confirm').click();
    await expect(page.getByTestId('result').textContent()).resolves.toMatch(/2 event\(s\) discarded/);
    expect(await Promise.all(first.map(statusOf))).toEqual(['discarded', 'discarded']);
    expect(await statusOf(late!)).toBe('dead');
  });

  it('replay shows a dry run, then progress until the copies are published', async () => {
    const page = await newPage();
    await page.goto(`${base}/console/login`);
    await page.fill('input[name=token]', TOKEN);
    await page.click('button:has-text("Log in")');
    await page.waitForURL(`${base}/console/`);
    await page.goto(`${base}/console/replay?since=1h&aggregate_type=Good`);
    await expect(page.getByTestId('replay-preview').textContent()).resolves.toMatch(
      /^2 event\(s\) would be replayed/,
    );
    await page.getByTestId('confirm').click();
    await page.waitForURL(/\/console\/replay\/jobs\/[0-9a-f]+$/);
    // The static script polls the progress and updates the page until the copies are published.
    await page.getByTestId('replay-state').filter({ hasText: 'done' }).waitFor({ timeout: 30_000 });
    await expect(page.getByTestId('replay-published').textContent()).resolves.toBe('2');
    await shot(page, 'replay');
    const records = await kafka.readAll('outbox.event.Good');
    expect(records.map((r) => JSON.parse(r.value!.toString()).seq)).toEqual([1, 2, 1, 2]);
    expect(records.slice(2).every((r) => r.headers['x-replay-of'] !== undefined)).toBe(true);
    expect(problemsOf(page)).toEqual([]);
  });
});
