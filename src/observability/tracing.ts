import type { OutboxEvent } from '../route/event.ts';

/**
 * Optional OpenTelemetry: one PRODUCER span per published batch, linked to the trace context
 * each event was written with (its `traceparent` column, plus `tracestate` from its headers).
 * A batch carries events of many traces, so the span links to them instead of picking one
 * parent (OpenTelemetry's messaging conventions for batch publishing).
 *
 * `@opentelemetry/api` is not a dependency of the relay (prom-client happens to bring it along,
 * for exemplars): when it cannot be loaded, createBatchTracer() returns a no-op; when it loads,
 * spans go to whatever SDK the deployment registers (e.g. with `node --import` of an
 * OpenTelemetry auto-setup), and nowhere — at next to no cost — when none is registered.
 */

/** A W3C trace context (https://www.w3.org/TR/trace-context/#traceparent-header). */
export interface TraceContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** Parses a traceparent header; null when absent or invalid (then the event gets no link). */
export function parseTraceparent(value: string | null | undefined): TraceContext | null {
  const m = value ? TRACEPARENT.exec(value.trim()) : null;
  if (!m) return null;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [
    string,
    string,
    string,
    string,
    string,
    string?,
  ];
  // ff is forbidden; version 00 has exactly four fields; later versions may append more.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return null;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16) };
}

export type BatchOutcome = 'published' | 'failed';

export interface BatchSpan {
  /** The batch's messages (each span links to their events' trace contexts). */
  messages: readonly { event: Pick<OutboxEvent, 'traceparent' | 'headers'> }[];
  outcome: BatchOutcome;
  /** ms since the epoch. */
  startMs: number;
  endMs: number;
  /** The topic when the batch has only one. */
  topic?: string;
  error?: string;
}

export interface BatchTracer {
  /** false for the no-op (no @opentelemetry/api installed). */
  readonly enabled: boolean;
  record(batch: BatchSpan): void;
}

/** The part of @opentelemetry/api used here (stable since 1.0; createTraceState since 1.1). */
export interface OtelApi {
  trace: { getTracer(name: string, version?: string): OtelTracer };
  createTraceState?: (raw?: string) => unknown;
}
interface OtelTracer {
  startSpan(
    name: string,
    options: {
      kind: number;
      startTime: number;
      attributes: Record<string, string | number>;
      links: { context: TraceContext & { isRemote: boolean; traceState?: unknown } }[];
    },
  ): {
    setStatus(status: { code: number; message?: string }): void;
    end(endTime: number): void;
  };
}

const SPAN_KIND_PRODUCER = 3;
const STATUS_OK = 1;
const STATUS_ERROR = 2;
/** OpenTelemetry SDKs drop links past 128 per span by default; more would only cost memory. */
export const MAX_LINKS = 128;

const NOOP: BatchTracer = { enabled: false, record() {} };

/** The specifier is a variable so TypeScript does not require the optional package. */
const OTEL_API = '@opentelemetry/api';

export async function createBatchTracer(
  load: () => Promise<unknown> = () => import(OTEL_API),
): Promise<BatchTracer> {
  let api: OtelApi;
  try {
    api = (await load()) as OtelApi;
  } catch {
    return NOOP;
  }
  if (typeof api?.trace?.getTracer !== 'function') return NOOP;
  const tracer = api.trace.getTracer('pg-outbox-relay');
  return {
    enabled: true,
    record(b) {
      const span = tracer.startSpan(
        b.topic ? `publish ${b.topic}` : 'publish',
        new PublishSpanOptions(b, api.createTraceState),
      );
      span.setStatus(
        b.outcome === 'published'
          ? { code: STATUS_OK }
          : { code: STATUS_ERROR, message: b.error ?? b.outcome },
      );
      span.end(b.endMs);
    },
  };
}

/**
 * A batch span's options. `links` is a getter, read only by a tracer that records: the API's
 * no-op tracer (no SDK registered) never looks, so a batch costs it nothing per event.
 *
 * A class, so that the getter is its prototype's. In an object literal (`{ get links() {…} }`,
 * how this was first written) every evaluation defines a new accessor on a fresh object, and V8
 * gives each such object a map of its own: maps live in the old generation, and each one pointed
 * at its getter, whose closure held the batch — the events, their decoded values, the routed
 * messages. Until the next mark-compact, every batch was reachable from an old object and
 * survived every scavenge: in live mode at 2,000 commits/s, 43 % of what the scavenges promoted
 * and half of the mark-compacts (docs/benchmarks.md, "The object-literal getter").
 */
class PublishSpanOptions {
  readonly kind = SPAN_KIND_PRODUCER;
  readonly startTime: number;
  readonly attributes: Record<string, string | number>;
  readonly #batch: BatchSpan;
  readonly #createTraceState: OtelApi['createTraceState'];

  constructor(b: BatchSpan, createTraceState: OtelApi['createTraceState']) {
    this.startTime = b.startMs;
    this.attributes = {
      'outbox.outcome': b.outcome,
      'messaging.system': 'kafka',
      'messaging.operation.type': 'send',
      'messaging.batch.message_count': b.messages.length,
      ...(b.topic ? { 'messaging.destination.name': b.topic } : {}),
    };
    this.#batch = b;
    this.#createTraceState = createTraceState;
  }

  /** One link per distinct trace context of the batch's events (at most MAX_LINKS). */
  get links() {
    const messages = this.#batch.messages;
    const out = [];
    const seen = new Set<string>();
    for (let i = 0; i < messages.length; i++) {
      const e = messages[i]!.event;
      const ctx = parseTraceparent(e.traceparent);
      if (!ctx || seen.has(ctx.traceId + ctx.spanId)) continue;
      seen.add(ctx.traceId + ctx.spanId);
      const state = e.headers.tracestate;
      out.push({
        context: {
          ...ctx,
          isRemote: true,
          ...(typeof state === 'string' && this.#createTraceState
            ? { traceState: this.#createTraceState(state) }
            : {}),
        },
      });
      if (out.length === MAX_LINKS) break;
    }
    return out;
  }
}
