import type { IncomingMessage, ServerResponse } from 'node:http';
import type pg from 'pg';
import { operatorPresetOf } from '../compat/presets.ts';
import type { Config } from '../config/load.ts';
import { OPTIONS } from '../config/options.ts';
import { errorMessage } from '../errors.ts';
import type { RelayView } from '../observability/health.ts';
import type { Logger } from '../observability/logger.ts';
import { topicOfEvents } from '../ops/events.ts';
import { OpsConflictError, OpsInputError, OpsNotFoundError } from '../ops/input-error.ts';
import type { OpsContext } from '../ops/operator.ts';
import type { HealthSource } from '../ops/status-report.ts';
import { migrateRemedy, SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { createPool } from '../store/pool.ts';
import { qualified } from '../store/sql-ident.ts';
import { Auth } from './auth.ts';
import { Counts, PageData } from './page-data.ts';
import { messagePage } from './pages/actions.ts';
import { BASE } from './pages/layout.ts';
import { ReplayJobs } from './replay-jobs.ts';
import { Reply, readForm, resolve } from './router.ts';
import { consoleRoutes, type Exchange, readAssets } from './routes.ts';
import { Sampler } from './sampler.ts';

export interface ConsoleOptions {
  config: Config;
  /** The in-process relay (the object /readyz reads). */
  relay: RelayView;
  /** The health verdict of `outbox-relay status`, the one /readyz and the metrics show. */
  health: HealthSource;
  log: Logger;
  /** How often the console samples the slot and the metrics for its charts. */
  sampleEveryMs?: number;
  /** How far back the charts go. */
  historySpanMs?: number;
}

export interface ConsoleHandler {
  /** Serves a request whose path starts with /console. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  close(): Promise<void>;
}

/**
 * The operator console (docs/console.md), served under /console by the relay's HTTP server.
 * Server-rendered pages; one CSS and one JS file. Its queries run on its own small pool (the
 * operator pool), never on the relay's connections, each bounded by a LIMIT or a page size,
 * with a statement timeout. Reads are open to whoever reaches the port; actions (resend,
 * discard, replay) need the operator token (--console-token-file) and go through the CLI's
 * functions and audit log (src/ops/).
 *
 * This file is the wiring: it builds the parts once and hands each what it needs — auth.ts (who
 * may do what), sampler.ts (the charts' history), page-data.ts (what each page shows), actions.ts
 * (the changes), routes.ts (the route table) over router.ts (matching, forms, the answer's
 * headers) — and answers each request: the visitor, the preset's closed paths, the form of a
 * POST, the route, and the page for an operator's bad input or a lost race.
 */
export function startConsole(o: ConsoleOptions): ConsoleHandler {
  const { config: c, relay, health } = o;
  const slot = c.slot;
  const auth = new Auth(c.consoleToken ?? null);
  const log = o.log.child({ component: 'console' });
  const table = qualified(c.schema, c.table);
  // The events of its pages and actions: the outbox table's, or with --compat debezium the side table's.
  const preset = operatorPresetOf(c);
  const events = preset.events;
  const pool = createPool({
    connectionString: c.databaseUrl,
    max: 2,
    application_name: 'outbox-relay console',
    statement_timeout: 10_000,
    idleTimeoutMillis: 30_000,
  });
  const opsContext = (db: pg.ClientBase): OpsContext => ({
    config: c,
    db,
    table,
    events,
    log: o.log,
    out: () => {},
  });
  const replayBatchSize = OPTIONS.find((x) => x.key === 'replayBatchSize')!.default as number;
  const jobs = new ReplayJobs({ pool, table, batchSize: replayBatchSize, log, opsContext });
  const [everyMs, spanMs] = [o.sampleEveryMs ?? 5_000, o.historySpanMs ?? 3600_000];
  const sampler = new Sampler({ relay, pool, slot, log, everyMs, spanMs });
  const counts = new Counts();
  const topicOf = topicOfEvents(c);
  const data = new PageData({ pool, relay, health, slot, events, table, topicOf, sampler, counts, jobs });
  const apply = { events, opsContext, changed: () => counts.forget() };
  const routes = consoleRoutes({ auth, data, jobs, pool, table, assets: readAssets(), apply, log });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://console.invalid');
    const path = url.pathname;
    const visitor = auth.visitor(req);
    const x: Exchange = {
      req,
      url,
      visitor,
      form: new URLSearchParams(),
      reply: new Reply(req, res, () => visitor.setCookies),
      ctx: () => ({ ...auth.seenBy(visitor), slot, table: events.table, cliFlags: preset.cliFlags }),
    };
    try {
      // Replay copies rows of the relay's own table; a preset's table may be the application's.
      if (preset.noReplay !== null && path.startsWith(`${BASE}/replay`))
        return x.reply.page(404, messagePage(x.ctx(), 'Not available', preset.noReplay));
      // Every POST's form is read (size-limited) before its route is looked up.
      if (req.method === 'POST') x.form = await readForm(req);
      const r = resolve(routes, req.method, path);
      if ('route' in r) return await r.route.run(x, r.groups);
      if (r.status === 405)
        return x.reply.send(405, 'text/plain', 'method not allowed\n', { allow: r.allow });
      return x.reply.page(404, messagePage(x.ctx(), 'Not found', `No page at ${path}.`));
    } catch (e) {
      // A resend/discard that lost a race (rolled back, nothing changed): look again, try again.
      if (e instanceof OpsConflictError)
        return x.reply.page(409, messagePage(x.ctx(), 'Changed meanwhile', e.message));
      if (e instanceof OpsInputError) {
        const missing = e instanceof OpsNotFoundError;
        return x.reply.page(
          missing ? 404 : 400,
          messagePage(x.ctx(), missing ? 'Not found' : 'Bad input', e.message),
        );
      }
      // A table the page reads is not there yet (the outbox, the progress record, a preset's
      // side table): say which and what creates it, instead of a bare 500.
      if (sqlStateOf(e) === SqlState.UNDEFINED_TABLE)
        return x.reply.page(
          503,
          messagePage(
            x.ctx(),
            'Not migrated',
            `${errorMessage(e)}: the relay's tables are not created yet in this database. ${migrateRemedy(preset.cliFlags)} Then reload.`,
          ),
        );
      throw e;
    }
  };

  return {
    handle,
    async close() {
      await sampler.close();
      await pool.end().catch(() => {});
    },
  };
}
