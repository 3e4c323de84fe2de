import { html } from '../html.ts';
import type { FilterParams } from '../params.ts';
import type { ReplayJobView } from '../replay-jobs.ts';
import { filterForm } from './events.ts';
import { actionGate, BASE, csrfField, errorBox, iso, layout, type PageContext } from './layout.ts';

export interface ReplayFormData {
  params: FilterParams;
  error: string | null;
  /** The dry run, once a window was given. */
  preview: {
    count: number;
    firstId: string | null;
    lastId: string | null;
    description: Record<string, string>;
  } | null;
  jobs: readonly ReplayJobView[];
}

export function replayPage(ctx: PageContext, d: ReplayFormData) {
  const p = d.params;
  const gate = actionGate(ctx);
  const body = html`<h1>Replay</h1>
<p>Re-inserts copies of the events of a window (new id, same <code>event_id</code>, headers <code>x-replay-of</code> and <code>x-replayed-at</code>) in original id order, so the relay publishes them again. Consumers deduplicate by <code>event_id</code>. By default it copies published and pending events.</p>
${filterForm(p, `${BASE}/replay`)}
${d.error ? errorBox(d.error) : ''}
${
  d.preview
    ? html`<section><h2>Dry run</h2>
<p data-testid="replay-preview">${d.preview.count} event(s) would be replayed${d.preview.count ? ` (original ids ${d.preview.firstId}…${d.preview.lastId})` : ''}. Nothing has changed yet.</p>
<p class="muted">filter: <code>${JSON.stringify(d.preview.description)}</code></p>
${
  d.preview.count === 0
    ? ''
    : (gate ??
      html`<form method="post" action="${BASE}/replay/start" class="confirm">${csrfField(ctx)}
${p.status.map((s) => html`<input type="hidden" name="status" value="${s}">`)}
<input type="hidden" name="since" value="${p.since ?? ''}"><input type="hidden" name="until" value="${p.until ?? ''}">
<input type="hidden" name="aggregate_type" value="${p.aggregateType ?? ''}"><input type="hidden" name="aggregate_id" value="${p.aggregateId ?? ''}">
<button type="submit" data-testid="confirm">Yes, replay ${d.preview.count} event(s)</button>
</form>`)
}</section>`
    : html`<p class="muted">Give at least <em>since</em>, then Apply for a dry run.</p>`
}
${
  d.jobs.length
    ? html`<section><h2>Replays started here</h2><ul>${d.jobs.map(
        (j) =>
          html`<li><a href="${BASE}/replay/jobs/${j.id}">${iso(new Date(j.startedAt))}</a>: ${j.state}, ${j.copied} of ${j.total} copied, ${j.published} published</li>`,
      )}</ul></section>`
    : ''
}`;
  return layout(ctx, 'Replay', body, { nav: 'replay' });
}

export function replayJobPage(ctx: PageContext, j: ReplayJobView) {
  const body = html`<p><a href="${BASE}/replay">← Replay</a></p>
<h1>Replay started ${iso(new Date(j.startedAt))}</h1>
<div class="replay-job" data-job="${BASE}/replay/jobs/${j.id}.json">
<p>State: <strong data-field="state" data-testid="replay-state">${j.state}</strong></p>
<p>Copied <span data-field="copied">${j.copied}</span> of <span data-field="total">${j.total}</span></p>
<progress data-field="copiedProgress" max="${Math.max(1, j.total)}" value="${j.copied}"></progress>
<p>Published <span data-field="published" data-testid="replay-published">${j.published}</span> of <span data-field="total2">${j.total}</span>
 · on their way (pending, failed or parked) <span data-field="pending">${j.pending}</span> · dead or discarded <span data-field="unhealthy">${j.unhealthy}</span></p>
<progress data-field="publishedProgress" max="${Math.max(1, j.total)}" value="${j.published}"></progress>
<p class="detail" data-field="message">${j.message}</p>
</div>
<p class="muted">filter: <code>${JSON.stringify(j.filter)}</code> · x-replayed-at <code>${j.replayedAt}</code></p>`;
  return layout(ctx, 'Replay progress', body, { nav: 'replay' });
}
