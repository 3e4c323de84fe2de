/**
 * W3C Trace Context of the caller's active OpenTelemetry span, so the consumer's span can link back to
 * the request that produced the event. @opentelemetry/api is an optional peer: when it cannot be
 * imported (not installed) or no span is active, events simply carry no traceparent.
 */

/** The part of @opentelemetry/api this module uses (typed here: the package may be absent). */
export interface OtelApiLike {
  trace: { getActiveSpan(): { spanContext(): SpanContextLike } | undefined };
}

export interface SpanContextLike {
  traceId: string;
  spanId: string;
  traceFlags: number;
  traceState?: { serialize(): string } | undefined;
}

export interface TraceContext {
  traceparent: string;
  /** Vendor state; absent when empty. */
  tracestate?: string;
}

const TRACE_ID = /^(?!0{32}$)[0-9a-f]{32}$/;
const SPAN_ID = /^(?!0{16}$)[0-9a-f]{16}$/;

/** `00-<trace-id>-<span-id>-<flags>`, or null for an invalid (e.g. non-recording, all-zero) context. */
export function formatTraceparent(sc: SpanContextLike): string | null {
  if (!TRACE_ID.test(sc.traceId) || !SPAN_ID.test(sc.spanId)) return null;
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `00-${sc.traceId}-${sc.spanId}-${flags}`;
}

let cached: Promise<OtelApiLike | null> | undefined;

/** Imports @opentelemetry/api once per process; null when it is not installed. */
export function loadOtelApi(): Promise<OtelApiLike | null> {
  cached ??= (async () => {
    // A variable specifier keeps TypeScript and bundlers from requiring the optional package.
    const specifier = '@opentelemetry/api';
    try {
      const mod = (await import(specifier)) as Partial<OtelApiLike> & { default?: Partial<OtelApiLike> };
      const api = mod.trace ? mod : mod.default;
      return api?.trace ? (api as OtelApiLike) : null;
    } catch {
      return null;
    }
  })();
  return cached;
}

/** The active span's trace context, or null (no OpenTelemetry, no active span, invalid context). */
export async function activeTraceContext(
  load: () => Promise<OtelApiLike | null> = loadOtelApi,
): Promise<TraceContext | null> {
  const api = await load();
  const span = api?.trace.getActiveSpan();
  if (!span) return null;
  const sc = span.spanContext();
  const traceparent = formatTraceparent(sc);
  if (!traceparent) return null;
  const tracestate = sc.traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}
