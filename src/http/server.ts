import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, type Registry } from 'prom-client';
import type { Config } from '../config/load.ts';
import { type ConsoleHandler, startConsole } from '../console/console.ts';
import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import {
  liveness,
  MIN_STUCK_AFTER_MS,
  ProgressWatch,
  type RelayView,
  readiness,
  readSample,
  type Sample,
  type Verdict,
} from '../observability/health.ts';
import type { Logger } from '../observability/logger.ts';
import { HealthWatch } from './health-watch.ts';

export interface HttpServerOptions {
  port: number;
  host: string;
  relay: RelayView;
  slot: string;
  log: Logger;
  /** See stuckAfterFor() in health.ts. */
  stuckAfterMs?: number;
  /** How often the relay is sampled for movement (liveness). */
  sampleEveryMs?: number;
  /** Serve the operator console under /console (src/console/), with this config. */
  console?: { config: Config; sampleEveryMs?: number };
  /**
   * Read the health verdict of `outbox-relay status` every everyMs (default HEALTH_EVERY_MS) for
   * /readyz's body, the console and the outbox_health metrics (health-watch.ts). Without it, the
   * console's config is used; with neither, /readyz has no verdict.
   */
  health?: { config: Config; everyMs?: number };
}

export interface HttpServer {
  /** The bound port (differs from the option when it was 0). */
  readonly port: number;
  close(): Promise<void>;
}

// prom-client throws when a default metric is registered twice in one registry.
const withDefaults = new WeakSet<Registry>();

/** Adds Node's process metrics (CPU, memory, event-loop lag, GC) to the registry, once. */
export function collectProcessMetrics(register: Registry): void {
  if (withDefaults.has(register)) return;
  withDefaults.add(register);
  collectDefaultMetrics({ register });
}

/**
 * The relay's HTTP endpoints, on one plain node:http server:
 *   GET /metrics  Prometheus text format of the relay's registry (+ process metrics)
 *   GET /healthz  liveness  — 200 or 503, JSON (semantics in health.ts)
 *   GET /readyz   readiness — 200 while streaming, else 503 with the reason, JSON; the body also
 *                 holds `status`'s health verdict (`health`), which never changes the answer
 *   /console/…    the operator console, when enabled (--console; docs/console.md); / redirects to it
 */
export async function startHttpServer(o: HttpServerOptions): Promise<HttpServer> {
  const registry = o.relay.metrics.registry;
  collectProcessMetrics(registry);
  const stuckAfterMs = o.stuckAfterMs ?? MIN_STUCK_AFTER_MS;
  const watch = new ProgressWatch();
  const sample = async () => {
    const s = await readSample(o.relay);
    watch.observe(s);
    return s;
  };
  // Sampled on a timer, not only per request, so movement is timed to the second even when
  // nothing probes for a while.
  const timer = setInterval(() => sample().catch(() => {}), o.sampleEveryMs ?? 1000);
  timer.unref();

  const healthConfig = o.health?.config ?? o.console?.config;
  const health = healthConfig
    ? new HealthWatch({
        config: healthConfig,
        metrics: o.relay.metrics.health,
        log: o.log,
        everyMs: o.health?.everyMs,
        relay: o.relay,
      })
    : null;

  const body = (s: Sample, v: Verdict) => ({
    state: s.state,
    slot: o.slot,
    confirmedLsn: s.confirmedLsn,
    secondsSinceProgress: s.lastProgressAt === null ? null : Math.round((s.at - s.lastProgressAt) / 100) / 10,
    ...(v.reason ? { reason: v.reason } : {}),
    ...(v.detail ? { detail: v.detail } : {}),
  });
  /** /readyz's body also carries `status`'s verdict: the answer (200/503) stays readiness alone. */
  const verdictBody = () => {
    if (!health) return {};
    const h = health.current;
    return {
      health: {
        verdict: h.verdict,
        problems: h.problems,
        findings: h.findings,
        checkedAt: h.checkedAt === null ? null : new Date(h.checkedAt).toISOString(),
      },
    };
  };

  const operatorConsole: ConsoleHandler | null =
    o.console && health
      ? startConsole({
          config: o.console.config,
          relay: o.relay,
          health,
          log: o.log,
          sampleEveryMs: o.console.sampleEveryMs,
        })
      : null;

  // Routed by hand on node:http, not by a framework (express, fastify): three read-only paths and
  // the console's prefix; a framework would add a dependency tree, its own body parsing and error
  // pages to a port that Kubernetes probes every few seconds, for a switch statement.
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    if (operatorConsole && (path === '/console' || path?.startsWith('/console/')))
      return operatorConsole.handle(req, res);
    if (operatorConsole && path === '/' && req.method === 'GET') {
      return send(res, 303, 'text/plain', 'see /console/\n', { location: '/console/' });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return send(res, 405, 'text/plain', 'method not allowed\n', { allow: 'GET, HEAD' });
    }
    switch (path) {
      case '/metrics':
        return send(res, 200, registry.contentType, await registry.metrics());
      case '/healthz':
      case '/readyz': {
        const s = await sample();
        if (path === '/healthz') {
          const v = liveness(s, watch.movedAt, stuckAfterMs);
          return send(res, v.ok ? 200 : 503, 'application/json', `${JSON.stringify(body(s, v))}\n`);
        }
        const v = readiness(s);
        const answer = { ...body(s, v), ...verdictBody() };
        return send(res, v.ok ? 200 : 503, 'application/json', `${JSON.stringify(answer)}\n`);
      }
      default:
        return send(res, 404, 'text/plain', 'not found: try /metrics, /healthz or /readyz\n');
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e) => {
      o.log.warn({ err: errorMessage(e), path: req.url }, 'http request failed');
      if (!res.headersSent) send(res, 500, 'text/plain', 'internal error\n');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  }).catch(async (e) => {
    clearInterval(timer);
    await operatorConsole?.close();
    await health?.close();
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `--http-host ${o.host} --http-port ${o.port}: cannot listen: ${errorMessage(e)} (choose another port, or --no-http)`,
      { cause: e },
    );
  });
  const port = (server.address() as AddressInfo).port;
  o.log.info(
    { host: o.host, port, console: !!operatorConsole },
    `http server listening (/metrics, /healthz, /readyz${operatorConsole ? ', /console/' : ''})`,
  );

  return {
    port,
    close: async () => {
      clearInterval(timer);
      // Since Node 19 close() also ends idle kept-alive connections (scrapers keep them).
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await operatorConsole?.close();
      await health?.close();
    },
  };
}

function send(
  res: ServerResponse,
  status: number,
  type: string,
  text: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : text);
}
