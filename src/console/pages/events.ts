import type { EventRecord } from '../../lifecycle/queries.ts';
import { STATUSES } from '../../lifecycle/statuses.ts';
import { html, query } from '../html.ts';
import type { FilterParams } from '../params.ts';
import { BASE, errorBox, eventsTable, layout, type PageContext, statusBadge } from './layout.ts';

export interface EventsData {
  params: FilterParams;
  /** Bad filter input, shown instead of results. */
  error: string | null;
  rows: readonly EventRecord[];
  /** Counts of the whole filter (every page), by status. */
  counts: Record<string, number>;
  nextAfterId: string | null;
  limit: number;
}

export function filterForm(p: FilterParams, action: string, extra: { statuses?: readonly string[] } = {}) {
  const statuses = extra.statuses ?? STATUSES;
  return html`<form method="get" action="${action}" class="filters">
<fieldset><legend>status</legend>
${statuses.map(
  (s) =>
    html`<label><input type="checkbox" name="status" value="${s}"${p.status.includes(s) ? html` checked` : ''}> ${s}</label>`,
)}
</fieldset>
<label>since <input name="since" value="${p.since ?? ''}" placeholder="2h, 7d or 2026-11-20T14:00Z"></label>
<label>until <input name="until" value="${p.until ?? ''}" placeholder="(now)"></label>
<label>aggregate type <input name="aggregate_type" value="${p.aggregateType ?? ''}"></label>
<label>aggregate id <input name="aggregate_id" value="${p.aggregateId ?? ''}"></label>
<label>event type <input name="event_type" value="${p.eventType ?? ''}"></label>
<label>error contains <input name="error_contains" value="${p.errorContains ?? ''}" placeholder="e.g. MESSAGE_TOO_LARGE"></label>
<button type="submit">Apply</button>
</form>`;
}

export function filterQuery(p: FilterParams, extra: Record<string, string | undefined> = {}) {
  return query({
    status: p.status,
    since: p.since,
    until: p.until,
    aggregate_type: p.aggregateType,
    aggregate_id: p.aggregateId,
    event_type: p.eventType,
    error_contains: p.errorContains,
    ...extra,
  });
}

export function eventsPage(ctx: PageContext, d: EventsData) {
  const total = Object.values(d.counts).reduce((a, b) => a + b, 0);
  const resolvable =
    d.params.status.length > 0 && d.params.status.every((s) => s === 'failed' || s === 'dead');
  const body = html`<h1>Events</h1>
${filterForm(d.params, `${BASE}/events`)}
${
  d.error
    ? errorBox(d.error)
    : html`<p class="summary" data-testid="events-count">${total} matching event(s)${Object.keys(d.counts).length ? ': ' : ''}${Object.entries(
        d.counts,
      ).map(
        ([s, n]) => html`${statusBadge(s)} ${n} `,
      )}${d.params.afterId ? html` · showing ids after ${d.params.afterId}` : ''}</p>
${
  resolvable && total > 0
    ? html`<p class="bulk">For every matching event:
<a class="button" href="${BASE}/actions/preview${filterQuery(d.params, { action: 'resend', scope: 'filter' })}">Resend all…</a>
<a class="button danger" href="${BASE}/actions/preview${filterQuery(d.params, { action: 'discard', scope: 'filter' })}">Discard all…</a>
<span class="muted">(a preview comes first)</span></p>`
    : html`<p class="muted">To resend or discard a filtered set, filter on failed and/or dead only.</p>`
}
${eventsTable(d.rows)}
<p class="pager">${
        d.params.afterId ? html`<a href="${BASE}/events${filterQuery(d.params)}">« first page</a> ` : ''
      }${
        d.nextAfterId
          ? html`<a href="${BASE}/events${filterQuery(d.params, { after_id: d.nextAfterId })}" rel="next">next ${d.limit} »</a>`
          : html`<span class="muted">no more</span>`
      }</p>`
}`;
  return layout(ctx, 'Events', body, { nav: 'events' });
}
