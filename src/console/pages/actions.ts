import type { EventRecord } from '../../lifecycle/queries.ts';
import { html, type SafeHtml } from '../html.ts';
import type { FilterParams } from '../params.ts';
import { actionGate, BASE, csrfField, errorBox, eventsTable, layout, type PageContext } from './layout.ts';

export type Action = 'resend' | 'discard';

/** What an action would touch, as its dry run found it. */
export interface Plan {
  action: Action;
  target: { id: string } | { filter: FilterParams; description: Record<string, string> };
  count: number;
  /** The highest id in the plan: the confirmed action never touches a row beyond it. */
  throughId: string | null;
  first: readonly EventRecord[];
  /** Resend or discard of one event: the parked events it releases, in order. */
  followers: number;
}

function hidden(name: string, value: string | undefined): SafeHtml | '' {
  return value === undefined ? '' : html`<input type="hidden" name="${name}" value="${value}">`;
}

function targetFields(t: Plan['target']): SafeHtml {
  if ('id' in t) return html`<input type="hidden" name="scope" value="id">${hidden('id', t.id)}`;
  const f = t.filter;
  return html`<input type="hidden" name="scope" value="filter">${f.status.map((s) => hidden('status', s))}${hidden('since', f.since)}${hidden('until', f.until)}${hidden('aggregate_type', f.aggregateType)}${hidden('aggregate_id', f.aggregateId)}${hidden('event_type', f.eventType)}${hidden('error_contains', f.errorContains)}`;
}

const VERB = { resend: 'Resend', discard: 'Discard' } as const;

export function previewPage(ctx: PageContext, p: Plan) {
  const what = 'id' in p.target ? `event ${p.target.id}` : `${p.count} event(s) matching the filter`;
  const effect =
    p.action === 'resend'
      ? 'They become failed and due now: the relay publishes them on its next sweep and then releases their parked followers in order.'
      : 'They become discarded (kept for audit until retention) and are never published; their parked followers are released in order.';
  const gate = actionGate(ctx);
  const body = html`<h1>${VERB[p.action]} ${what}?</h1>
<p class="dry-run" data-testid="preview-count">Dry run: this would ${p.action} <strong>${p.count}</strong> event(s).${
    p.followers ? html` ${p.followers} parked follower(s) of the aggregate would then be released.` : ''
  } Nothing has changed yet.</p>
<p>${effect}</p>
${'filter' in p.target ? html`<p class="muted">filter: <code>${JSON.stringify(p.target.description)}</code></p>` : ''}
<h2>${p.count > p.first.length ? `First ${p.first.length} of ${p.count}` : 'Events'}</h2>
${eventsTable(p.first)}
${
  p.count === 0
    ? html`<p>Nothing to do.</p>`
    : (gate ??
      html`<form method="post" action="${BASE}/actions/apply" class="confirm">
${csrfField(ctx)}<input type="hidden" name="action" value="${p.action}">${targetFields(p.target)}${hidden('through_id', p.throughId ?? undefined)}<input type="hidden" name="expected" value="${p.count}">
${p.action === 'resend' ? html`<label><input type="checkbox" name="reset_attempts" value="1"> reset attempts to 0 (the event gets every attempt again)</label>` : ''}
<p><button type="submit" class="${p.action === 'discard' ? 'danger' : ''}" data-testid="confirm">Yes, ${p.action} ${p.count} event(s)</button> <a href="${BASE}/events">Cancel</a></p>
</form>`)
}`;
  return layout(ctx, `${VERB[p.action]}?`, body, { nav: 'events' });
}

export function resultPage(
  ctx: PageContext,
  r: { action: Action; changed: number; expected: number; backTo: string },
) {
  const said =
    r.action === 'resend' ? `${r.changed} event(s) due again now` : `${r.changed} event(s) discarded`;
  const body = html`<h1>${VERB[r.action]}: done</h1>
<div class="notice ok" role="status" data-testid="result">${said}.</div>
${
  r.changed !== r.expected
    ? html`<p class="notice warn">The preview counted ${r.expected}; ${r.expected - r.changed} changed status meanwhile (e.g. the sweeper published them) and were left alone.</p>`
    : ''
}
<p>The action is in the relay's log as an audit line (<code>"audit":true</code>).</p>
<p><a href="${r.backTo}">Back</a> · <a href="${BASE}/">Overview</a></p>`;
  return layout(ctx, 'Done', body, { nav: 'events' });
}

export function messagePage(ctx: PageContext, title: string, message: string) {
  return layout(
    ctx,
    title,
    html`<h1>${title}</h1>${errorBox(message)}<p><a href="${BASE}/">Overview</a></p>`,
  );
}

export function loginPage(ctx: PageContext, opts: { error?: string } = {}) {
  const body = html`<h1>Log in</h1>
${opts.error ? errorBox(opts.error) : ''}
${
  ctx.actionsEnabled
    ? html`<form method="post" action="${BASE}/login" class="login">
${csrfField(ctx)}
<label>Operator token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Log in</button>
</form>
<p class="muted">The token is the content of the file given to the relay as <code>--console-token-file</code>. A session lasts 8 hours.</p>`
    : html`<p>No operator token is configured: the console is read-only.</p>`
}`;
  return layout(ctx, 'Log in', body);
}
