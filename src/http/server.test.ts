import { afterEach, describe, expect, it } from 'vitest';
import type { Config } from '../config/load.ts';
import { loadConfig } from '../config/load.ts';
import { isRelayError } from '../errors.ts';
import type { RelayView } from '../observability/health.ts';
import { silentLogger } from '../observability/logger.ts';
import { RelayMetrics, type RelayState } from '../observability/metrics.ts';
import { type HttpServer, startHttpServer } from './server.ts';

/** A relay as the server sees it, with fields the test moves by hand. */
function fakeRelay(state: RelayState = 'streaming') {
  const metrics = new RelayMetrics();
  metrics.setState(state);
  return {
    state,
    waitingReason: null as string | null,
    confirmedLsn: '0/16B3748' as string | null,
    lastProgressAt: Date.now() as number | null,
    metrics,
  } satisfies RelayView;
}

const servers: HttpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(
  relay: RelayView,
  extra: { stuckAfterMs?: number; sampleEveryMs?: number; console?: { config: Config } } = {},
) {
  const s = await startHttpServer({
    port: 0,
    host: '127.0.0.1',
    relay,
    slot: 'my_slot',
    log: silentLogger(),
    ...extra,
  });
  servers.push(s);
  const get = async (path: string, init?: RequestInit) => {
    const r = await fetch(`http://127.0.0.1:${s.port}${path}`, init);
    return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
  };
  return { server: s, get };
}

describe('http server', () => {
  it('serves the relay registry with process metrics; a second server on the same registry works too', async () => {
    const relay = fakeRelay();
    const { get } = await serve(relay);
    const m = await get('/metrics');
    expect(m.status).toBe(200);
    expect(m.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(m.text).toContain('outbox_relay_state{state="streaming"} 1');
    expect(m.text).toContain('process_cpu_user_seconds_total');
    expect(m.text).toContain('nodejs_eventloop_lag_seconds');
    // Registering the default metrics twice in one registry would throw.
    const again = await serve(relay);
    expect((await again.get('/metrics')).status).toBe(200);
  });

  it('answers /readyz and /healthz with the documented JSON', async () => {
    const relay = fakeRelay();
    const { get } = await serve(relay);
    const ready = await get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.type).toBe('application/json');
    const body = JSON.parse(ready.text);
    expect(body).toEqual({
      state: 'streaming',
      slot: 'my_slot',
      confirmedLsn: '0/16B3748',
      secondsSinceProgress: expect.any(Number),
    });
    expect(body.secondsSinceProgress).toBeLessThan(5);

    relay.state = 'standby';
    relay.waitingReason = 'slot my_slot is active in another process (pid 7)';
    relay.lastProgressAt = null;
    const standby = await get('/readyz');
    expect(standby.status).toBe(503);
    expect(JSON.parse(standby.text)).toEqual({
      state: 'standby',
      slot: 'my_slot',
      confirmedLsn: '0/16B3748',
      secondsSinceProgress: null,
      reason: 'standby',
      detail: relay.waitingReason,
    });
    const live = await get('/healthz');
    expect(live.status).toBe(200);
    expect(JSON.parse(live.text).reason).toBe('standby');

    relay.state = 'stopped';
    expect((await get('/healthz')).status).toBe(503);
    expect(JSON.parse((await get('/readyz')).text).reason).toBe('stopped');
  });

  it('fails /healthz when events are in flight and nothing moves, and recovers when a batch is published', async () => {
    const relay = fakeRelay();
    relay.metrics.inflightEvents.set(3);
    const { get } = await serve(relay, { stuckAfterMs: 150, sampleEveryMs: 10 });
    expect((await get('/healthz')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    const stuck = await get('/healthz');
    expect(stuck.status).toBe(503);
    expect(JSON.parse(stuck.text)).toMatchObject({
      reason: 'stuck',
      detail: expect.stringMatching(/^3 events/),
    });
    // Still ready: it holds the slot; restarting it is liveness' call, not readiness'.
    expect((await get('/readyz')).status).toBe(200);
    relay.lastProgressAt = Date.now();
    await new Promise((r) => setTimeout(r, 50));
    expect((await get('/healthz')).status).toBe(200);
  });

  it('answers unknown paths with 404, other methods with 405, HEAD without a body', async () => {
    const { get } = await serve(fakeRelay());
    expect((await get('/')).status).toBe(404);
    expect((await get('/metrics', { method: 'POST' })).status).toBe(405);
    const head = await get('/readyz', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it('reports a port in use as a configuration error naming the options', async () => {
    const { server } = await serve(fakeRelay());
    const err = await startHttpServer({
      port: server.port,
      host: '127.0.0.1',
      relay: fakeRelay(),
      slot: 's',
      log: silentLogger(),
    }).catch((e: unknown) => e);
    expect(isRelayError(err, 'CONFIG_INVALID')).toBe(true);
    expect((err as Error).message).toMatch(/--http-port \d+: cannot listen: .*EADDRINUSE/);
  });

  it('closes promptly with a kept-alive scraper connection open', async () => {
    const { server, get } = await serve(fakeRelay());
    await get('/metrics', { headers: { connection: 'keep-alive' } });
    const t0 = Date.now();
    await server.close();
    servers.splice(servers.indexOf(server), 1);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('serves the console under /console only with --console; the probes and /metrics stay as they are', async () => {
    const off = await serve(fakeRelay());
    expect((await off.get('/console/')).status).toBe(404);
    // A database nobody listens on: these pages and assets need none.
    const config = loadConfig(
      'run',
      ['--database-url', 'postgres://nobody@127.0.0.1:1/none', '--sink', 'stdout'],
      {
        OUTBOX_CONSOLE_TOKEN: 'a-token-of-enough-length',
      },
    ).config;
    const { get, server } = await serve(fakeRelay(), { console: { config } });
    const root = await get('/', { redirect: 'manual' });
    expect(root.status).toBe(303);
    const login = await fetch(`http://127.0.0.1:${server.port}/console/login`);
    expect(login.status).toBe(200);
    expect(login.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(login.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Strict/);
    const html = await login.text();
    expect(html).toContain('name="csrf"');
    expect(html).not.toContain('a-token-of-enough-length');
    expect((await get('/console/assets/console.js')).type).toBe('text/javascript; charset=utf-8');
    expect((await get('/console/assets/console.css')).status).toBe(200);
    expect((await get('/console/assets/../../etc/passwd')).status).toBe(404);
    expect((await get('/metrics')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
    expect((await get('/metrics', { method: 'POST' })).status).toBe(405);
    // An action without a session or CSRF token is refused.
    const forged = await get('/console/actions/apply', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'action=discard&scope=id&id=1',
    });
    expect(forged.status).toBe(403);
  });

  it('refuses an operator token shorter than 16 characters', async () => {
    const config = loadConfig('run', ['--database-url', 'postgres://n@127.0.0.1:1/n', '--sink', 'stdout'], {
      OUTBOX_CONSOLE_TOKEN: 'short',
    }).config;
    const err = await serve(fakeRelay(), { console: { config } }).catch((e: unknown) => e);
    expect(isRelayError(err, 'CONFIG_INVALID')).toBe(true);
    expect((err as Error).message).toMatch(/at least 16 characters/);
  });
});
