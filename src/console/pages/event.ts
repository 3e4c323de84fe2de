import type { EventRecord } from '../../lifecycle/queries.ts';
import { eventColumns } from '../../ops/events.ts';
import { renderPayload } from '../../ops/format.ts';
import type { Remedy } from '../../ops/remedies.ts';
import { html, query } from '../html.ts';
import { actionGate, BASE, eventsTable, iso, layout, type PageContext, statusBadge } from './layout.ts';

export interface EventData {
  event: EventRecord;
  /** Parked events of the same aggregate after this one (released in order once it is resolved). */
  followers: readonly EventRecord[];
  followersLimit: number;
  /** For a parked event: the failed or dead event of its aggregate that holds it. */
  heldBy: EventRecord | null;
  /** The topic the relay routes it to (null: no legal topic). */
  topic: string | null;
  /** What to do about its last error (ops/remedies.ts), when it has one. */
  remedy: Remedy | null;
}

function hexDump(b: Buffer): string {
  const lines: string[] = [];
  for (let i = 0; i < b.length && i < 64 * 1024; i += 16) {
    const chunk = b.subarray(i, i + 16);
    const hex = [...chunk].map((x) => x.toString(16).padStart(2, '0')).join(' ');
    const ascii = [...chunk].map((x) => (x >= 0x20 && x < 0x7f ? String.fromCharCode(x) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (b.length > 64 * 1024) lines.push(`… ${b.length - 64 * 1024} more bytes`);
  return lines.join('\n');
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

export function eventPage(ctx: PageContext, d: EventData) {
  const e = d.event;
  const p = renderPayload(e.payload);
  const bytes = e.payload?.length ?? 0;
  const text = e.payload ? e.payload.toString('utf8') : '';
  const resolvable = e.status === 'failed' || e.status === 'dead';
  const headers = Object.entries((e.headers ?? {}) as Record<string, unknown>);
  const body = html`<p><a href="${BASE}/events">← Events</a></p>
<h1>Event ${e.id} ${statusBadge(e.status)}</h1>
${
  e.last_error
    ? html`<section><h2>Last error</h2><pre class="error" data-testid="last-error">${e.last_error}</pre>
<p class="muted">${e.attempts} attempt(s)${e.next_attempt_at ? `; next attempt ${iso(e.next_attempt_at)}` : ''}. The table keeps the latest error of each event; the relay's log has every attempt (field <code>event_id</code>).</p></section>`
    : ''
}
${
  d.remedy && resolvable
    ? html`<section class="remedy" data-testid="remedy"><h2>What to do</h2>
<p>${d.remedy.cause ? html`<strong>${d.remedy.cause}</strong>${d.topic ? html` (topic <code>${d.topic}</code>)` : ''}. ` : ''}<span data-testid="remedy-fix">${capitalize(d.remedy.fix)}.</span></p>
<p>Then resend it (below), or with the CLI: <code>outbox-relay events resend ${e.id}${ctx.cliFlags}</code>.</p></section>`
    : ''
}
${
  resolvable
    ? html`<section class="actions"><h2>Actions</h2>
${actionGate(ctx) ?? ''}
<a class="button" href="${BASE}/actions/preview${query({ action: 'resend', id: e.id })}">Resend…</a>
<a class="button danger" href="${BASE}/actions/preview${query({ action: 'discard', id: e.id })}">Discard…</a>
<span class="muted">Both show what they will touch and ask before changing anything.</span></section>`
    : ''
}
${
  d.heldBy
    ? html`<div class="notice warn">Parked behind event <a href="${BASE}/events/${d.heldBy.id}">${d.heldBy.id}</a> (${d.heldBy.status}) of the same aggregate: it is published once that one is published or discarded.</div>`
    : ''
}
<section><h2>Columns</h2>
<table class="columns" data-testid="columns">
${eventColumns(e, '–').map(([k, v]) => html`<tr><th>${k}</th><td>${v}</td></tr>`)}
</table></section>
<section><h2>Headers</h2>
${
  headers.length
    ? html`<table class="columns">${headers.map(([k, v]) => html`<tr><th>${k}</th><td>${typeof v === 'string' ? v : JSON.stringify(v)}</td></tr>`)}</table>`
    : html`<p class="muted">none</p>`
}</section>
<section><h2>Payload <span class="muted">(${p.encoding}, ${bytes} bytes)</span></h2>
<pre class="payload" data-testid="payload">${p.text}</pre>
${
  e.payload
    ? html`<details><summary>as text</summary><pre class="payload">${text}</pre></details>
<details><summary>as hex</summary><pre class="payload">${hexDump(e.payload)}</pre></details>`
    : ''
}
</section>
<section><h2>Parked followers <span class="muted">(same aggregate, released in id order)</span></h2>
${eventsTable(d.followers, 'None: no later event of this aggregate is parked behind it.')}
${d.followers.length >= d.followersLimit ? html`<p><a href="${BASE}/events${query({ status: 'parked', aggregate_type: e.aggregate_type, aggregate_id: e.aggregate_id, after_id: e.id })}">All parked followers →</a></p>` : ''}
</section>
<p class="muted">CLI: <code>outbox-relay events show ${e.id}${ctx.cliFlags}</code></p>`;
  return layout(ctx, `Event ${e.id}`, body, { nav: 'events' });
}
