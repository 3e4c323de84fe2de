import { describe, expect, it } from 'vitest';
import { activeTraceContext, formatTraceparent, loadOtelApi, type OtelApiLike } from './trace-context.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

/** A stand-in for @opentelemetry/api with one active span (or none). */
function api(
  span: { traceId: string; spanId: string; traceFlags: number; state?: string } | null,
): OtelApiLike {
  return {
    trace: {
      getActiveSpan: () =>
        span
          ? {
              spanContext: () => ({
                ...span,
                traceState: span.state === undefined ? undefined : { serialize: () => span.state! },
              }),
            }
          : undefined,
    },
  };
}

describe('trace context', () => {
  it('formats a span context as a W3C traceparent', () => {
    expect(formatTraceparent({ traceId: TRACE, spanId: SPAN, traceFlags: 1 })).toBe(`00-${TRACE}-${SPAN}-01`);
    expect(formatTraceparent({ traceId: TRACE, spanId: SPAN, traceFlags: 0 })).toBe(`00-${TRACE}-${SPAN}-00`);
  });

  it('gives null for invalid contexts (all-zero ids, e.g. a non-recording root)', () => {
    expect(formatTraceparent({ traceId: '0'.repeat(32), spanId: SPAN, traceFlags: 1 })).toBeNull();
    expect(formatTraceparent({ traceId: TRACE, spanId: '0'.repeat(16), traceFlags: 1 })).toBeNull();
    expect(formatTraceparent({ traceId: 'xyz', spanId: SPAN, traceFlags: 1 })).toBeNull();
  });

  it('takes the active span, with its trace state', async () => {
    const got = await activeTraceContext(async () =>
      api({ traceId: TRACE, spanId: SPAN, traceFlags: 1, state: 'v=1' }),
    );
    expect(got).toEqual({ traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: 'v=1' });
    const noState = await activeTraceContext(async () =>
      api({ traceId: TRACE, spanId: SPAN, traceFlags: 1 }),
    );
    expect(noState).toEqual({ traceparent: `00-${TRACE}-${SPAN}-01` });
  });

  it('gives null without OpenTelemetry or without an active span', async () => {
    expect(await activeTraceContext(async () => null)).toBeNull();
    expect(await activeTraceContext(async () => api(null))).toBeNull();
  });

  it('loads @opentelemetry/api only if it is installed, and never throws', async () => {
    let installed = true;
    try {
      import.meta.resolve('@opentelemetry/api');
    } catch {
      installed = false;
    }
    const loaded = await loadOtelApi();
    expect(loaded === null).toBe(!installed);
    expect(await activeTraceContext()).toBeNull(); // no span is active here either way
  });
});
