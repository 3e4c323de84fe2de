import type { EventRecord } from '../../lifecycle/queries.ts';
import { STATUSES, UNHEALTHY } from '../../lifecycle/statuses.ts';
import { formatAge, formatBytes } from '../../ops/format.ts';
import type { HealthReading } from '../../ops/status-report.ts';
import type { SlotReading } from '../../sweeper/slot-watch.ts';
import { lineChart } from '../chart.ts';
import type { Point } from '../history.ts';
import { html, query } from '../html.ts';
import type { StateView } from '../relay-state.ts';
import { BASE, eventsTable, iso, layout, type PageContext, statusBadge } from './layout.ts';

export interface OverviewData {
  now: number;
  /** `outbox-relay status`'s verdict, as /readyz and outbox_health show it. */
  health: HealthReading;
  state: StateView;
  confirmedLsn: string | null;
  secondsSinceProgress: number | null;
  /** The slot as the verdict's reading saw it (the relay's own reading when the status could not be read). */
  slot: {
    reading: Pick<
      SlotReading,
      | 'active'
      | 'activePid'
      | 'walStatus'
      | 'invalidationReason'
      | 'safeWalSizeBytes'
      | 'retainedBytes'
      | 'confirmedLagBytes'
    > | null;
    error: string | null;
  };
  secondsToExhaustion: number | null;
  points: readonly Point[];
  spanMs: number;
  /** Events by status (all statuses); error when the count failed (e.g. statement timeout). */
  counts: { byStatus: Record<string, number>; error: string | null };
  publishRate: number | null;
  /** The relay's last transient error seen by the console's sampler. */
  lastRelayError: { at: number; text: string } | null;
  /** The oldest failed and dead events (they hold their aggregates' followers). */
  unhealthy: readonly EventRecord[];
}

const ORDER = STATUSES;

function seconds(v: number): string {
  if (v === 0) return '0 s';
  if (v < 1) return `${Math.round(v * 1000)} ms`;
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} s`;
}

export function overviewPage(ctx: PageContext, d: OverviewData) {
  const s = d.slot.reading;
  const from = d.now - d.spanMs;
  const walChart = lineChart(
    d.points.map((p) => ({ at: p.at, value: p.retainedBytes })),
    { title: 'Retained WAL', from, to: d.now, format: (v) => formatBytes(Math.round(v)) },
  );
  const lagChart = lineChart(
    d.points.map((p) => ({ at: p.at, value: p.lagSeconds })),
    { title: 'End-to-end lag (commit → broker ack)', from, to: d.now, format: seconds },
  );
  const total = Object.values(d.counts.byStatus).reduce((a, b) => a + b, 0);
  const body = html`<h1>Overview</h1>
${verdictSection(d.health)}
<section class="cards">
<div class="card state state-${d.state.tone}">
<h2>Relay</h2>
<p class="big" data-testid="relay-state">${d.state.state}</p>
<p>${d.state.explanation}</p>
${d.state.detail ? html`<p class="detail">${d.state.detail}</p>` : ''}
<dl>
<dt>confirmed LSN</dt><dd><code>${d.confirmedLsn ?? '–'}</code></dd>
<dt>last progress</dt><dd>${d.secondsSinceProgress === null ? '–' : `${formatAge(d.secondsSinceProgress)} ago`}</dd>
<dt>publish rate</dt><dd data-testid="publish-rate">${d.publishRate === null ? '–' : `${d.publishRate.toFixed(1)} events/s`}</dd>
</dl>
</div>
<div class="card">
<h2>Slot <code>${ctx.slot}</code></h2>
${
  d.slot.error
    ? html`<p class="bad">cannot read the slot: ${d.slot.error}</p>`
    : !s
      ? html`<p class="bad">The slot does not exist: events committed now are not captured.</p>`
      : html`<dl>
<dt>active</dt><dd data-testid="slot-active">${s.active ? `yes (pid ${s.activePid})` : html`<span class="bad">no: nobody streams from it, WAL accumulates</span>`}</dd>
<dt>retained WAL</dt><dd data-testid="retained-wal">${formatBytes(s.retainedBytes)}</dd>
<dt>wal_status</dt><dd><span class="walstatus walstatus-${s.walStatus ?? 'none'}">${s.walStatus ?? '–'}</span>${s.invalidationReason ? ` (invalidation_reason ${s.invalidationReason})` : ''}</dd>
<dt>safe WAL size</dt><dd>${s.safeWalSizeBytes === null ? 'unlimited (max_slot_wal_keep_size = -1)' : formatBytes(s.safeWalSizeBytes)}</dd>
<dt>time to exhaustion</dt><dd>${d.secondsToExhaustion === null ? (s.safeWalSizeBytes === null ? 'no limit' : 'not growing') : formatAge(d.secondsToExhaustion)}</dd>
<dt>lag behind current WAL</dt><dd>${formatBytes(s.confirmedLagBytes)}</dd>
${failoverRow(d.health)}
</dl>`
}
</div>
<div class="card">
<h2>Events by status</h2>
${d.counts.error ? html`<p class="bad">${d.counts.error}</p>` : ''}
<table class="counts" data-testid="counts">
${ORDER.map(
  (st) =>
    html`<tr><td>${statusBadge(st)}</td><td class="num"><a href="${BASE}/events${query({ status: st })}">${d.counts.byStatus[st] ?? 0}</a></td></tr>`,
)}
<tr class="total"><td>total</td><td class="num">${total}</td></tr>
</table>
</div>
</section>
<section class="charts">
<figure><figcaption>Retained WAL, last ${Math.round(d.spanMs / 60_000)} min</figcaption>${walChart}</figure>
<figure><figcaption>End-to-end lag, last ${Math.round(d.spanMs / 60_000)} min</figcaption>${lagChart}</figure>
</section>
<section>
<h2>Last error</h2>
${
  d.lastRelayError
    ? html`<p><span class="muted">${iso(new Date(d.lastRelayError.at))} (relay)</span></p><pre class="error">${d.lastRelayError.text}</pre>`
    : html`<p class="muted">No transient relay error since the console started.</p>`
}
${
  d.unhealthy[0]?.last_error
    ? html`<p><span class="muted">event <a href="${BASE}/events/${d.unhealthy[0].id}">${d.unhealthy[0].id}</a> (oldest failed or dead)</span></p><pre class="error">${d.unhealthy[0].last_error}</pre>`
    : ''
}
</section>
<section>
<h2>Failed and dead events <span class="muted">(oldest first; they hold their aggregates' later events)</span></h2>
${eventsTable(d.unhealthy, 'No failed or dead events.')}
${d.unhealthy.length ? html`<p><a href="${BASE}/events${query({ status: [...UNHEALTHY] })}">All failed, dead and parked events →</a></p>` : ''}
</section>`;
  return layout(ctx, 'Overview', body, { refreshSeconds: 10, nav: 'overview' });
}

/** PostgreSQL 17+: whether the slot survives a failover, as `status` reads it (its findings say why not). */
function failoverRow(h: HealthReading) {
  const f = h.report?.failover;
  if (!f || f.state === 'unsupported') return '';
  const copy = f.standbyCopy
    ? `; standby's copy ${f.standbyCopy.synced ? 'synced' : 'not synced'}, ${f.standbyCopy.temporary ? 'temporary' : 'persistent'}`
    : '';
  const text = `${f.state}${copy}`;
  return html`<dt>failover</dt><dd data-testid="failover">${f.stalled ? html`<span class="bad">stalled: decoding waits for a standby of synchronized_standby_slots</span>; ` : ''}${f.ready === false ? html`<span class="warn">${text}</span>` : text}</dd>`;
}

const VERDICT_TEXT = {
  healthy: 'Nothing needs doing.',
  degraded: 'Events flow, but something needs watching.',
  unhealthy: 'Something needs doing now.',
  unknown: 'The status could not be read.',
} as const;

/** The verdict of `outbox-relay status`, each finding with what to do and the topics it names. */
function verdictSection(h: HealthReading) {
  const tone = h.verdict === 'healthy' ? 'ok' : h.verdict === 'degraded' ? 'warn' : 'bad';
  return html`<section class="verdict verdict-${tone}" data-testid="verdict" data-verdict="${h.verdict}">
<h2>Health: <span data-testid="verdict-value">${h.verdict}</span></h2>
<p>${VERDICT_TEXT[h.verdict]} <span class="muted">The verdict of <code>outbox-relay status</code>, also in the body of <code>/readyz</code> and the metric <code>outbox_health</code>${h.checkedAt === null ? '' : html`; read at ${iso(new Date(h.checkedAt))}`}.</span></p>
${
  h.findings.length
    ? html`<ul class="findings" data-testid="findings">
${h.findings.map(
  (f) => html`<li class="finding finding-${f.severity}" data-problem="${f.id}">
<p class="problem">${f.severity === 'warning' ? html`<span class="badge">warning</span> ` : ''}${f.text}</p>
${f.topics.length ? html`<p class="topics">topic${f.topics.length > 1 ? 's' : ''}: ${f.topics.map((t, i) => html`${i ? ', ' : ''}<code data-testid="failing-topic">${t}</code>`)}</p>` : ''}
${f.fix ? html`<p class="fix"><strong>What to do:</strong> ${f.fix}</p>` : ''}
</li>`,
)}
</ul>`
    : ''
}
</section>`;
}
