import type { EventRecord } from '../../lifecycle/queries.ts';
import { truncate } from '../../ops/format.ts';
import { html, type SafeHtml } from '../html.ts';

/** What every page knows about the visitor. Never holds the operator token. */
export interface PageContext {
  /** An operator token is configured: actions are possible after logging in. */
  actionsEnabled: boolean;
  loggedIn: boolean;
  /** The CSRF token of the visitor's session, for every form. */
  csrf: string;
  slot: string;
  /** The table the events pages show (with --compat debezium, the side table). */
  table: string;
  /** What the CLI commands the pages quote need beyond the ids (` --compat debezium`, or ''). */
  cliFlags: string;
}

export const BASE = '/console';

export function layout(
  ctx: PageContext,
  title: string,
  body: SafeHtml,
  opts: { refreshSeconds?: number; nav?: 'overview' | 'events' | 'replay' } = {},
): SafeHtml {
  const link = (href: string, label: string, key: string) =>
    html`<a href="${href}"${opts.nav === key ? html` aria-current="page"` : ''}>${label}</a>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · outbox relay console</title>
<link rel="icon" href="${BASE}/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${BASE}/assets/console.css">
<script src="${BASE}/assets/console.js" defer></script>
</head>
<body${opts.refreshSeconds ? html` data-refresh="${opts.refreshSeconds}"` : ''}>
<header class="top">
<span class="brand">outbox relay</span>
<nav>${link(`${BASE}/`, 'Overview', 'overview')}${link(`${BASE}/events`, 'Events', 'events')}${link(`${BASE}/replay`, 'Replay', 'replay')}</nav>
<span class="who">${session(ctx)}</span>
</header>
<main>
${body}
</main>
<footer>slot <code>${ctx.slot}</code> · table <code>${ctx.table}</code></footer>
</body>
</html>
`;
}

function session(ctx: PageContext): SafeHtml {
  if (!ctx.actionsEnabled)
    return html`<span class="badge" title="no operator token is configured (--console-token-file)">read-only</span>`;
  if (!ctx.loggedIn) return html`<a class="button small" href="${BASE}/login">Log in</a>`;
  return html`<form method="post" action="${BASE}/logout" class="inline">${csrfField(ctx)}<span class="badge ok">operator</span> <button class="small">Log out</button></form>`;
}

export function csrfField(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="csrf" value="${ctx.csrf}">`;
}

export function iso(d: Date | null | undefined): string {
  return d ? d.toISOString().replace('.000Z', 'Z') : '–';
}

export function statusBadge(status: string): SafeHtml {
  return html`<span class="status status-${status}">${status}</span>`;
}

/** The events table of the list, the overview and the previews. */
export function eventsTable(rows: readonly EventRecord[], empty = 'No events.'): SafeHtml {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<table class="events">
<thead><tr><th>id</th><th>status</th><th>aggregate</th><th>event type</th><th>attempts</th><th>created</th><th>last error</th></tr></thead>
<tbody>
${rows.map(
  (e) => html`<tr>
<td><a href="${BASE}/events/${e.id}">${e.id}</a></td>
<td>${statusBadge(e.status)}</td>
<td><span class="agg">${e.aggregate_type}</span> / ${truncate(e.aggregate_id, 40)}</td>
<td>${truncate(e.event_type, 40)}</td>
<td class="num">${e.attempts}</td>
<td class="nowrap">${iso(e.created_at)}</td>
<td class="error-cell">${truncate(e.last_error ?? '', 120)}</td>
</tr>
`,
)}</tbody>
</table>`;
}

export function errorBox(message: string): SafeHtml {
  return html`<div class="notice bad" role="alert">${message}</div>`;
}

/** Why an action cannot be taken here, and how to get there. */
export function actionGate(ctx: PageContext): SafeHtml | null {
  if (!ctx.actionsEnabled) {
    return html`<div class="notice warn">The console is read-only: no operator token is configured. Start the relay with <code>--console-token-file</code> (or <code>OUTBOX_CONSOLE_TOKEN_FILE</code>) to enable actions, or use the CLI (<code>outbox-relay events …</code>).</div>`;
  }
  if (!ctx.loggedIn) {
    return html`<div class="notice warn">Actions need the operator token: <a href="${BASE}/login">log in</a> first.</div>`;
  }
  return null;
}
