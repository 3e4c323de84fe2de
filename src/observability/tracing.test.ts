import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { createBatchTracer, MAX_LINKS, parseTraceparent } from './tracing.ts';

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('parseTraceparent', () => {
  it('reads version 00', () => {
    expect(parseTraceparent(TP)).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: 1,
    });
    expect(parseTraceparent(` ${TP.replace(/01$/, '00')} `)?.traceFlags).toBe(0);
  });

  it('accepts extra fields only from later versions', () => {
    expect(parseTraceparent(`${TP}-extra`)).toBeNull();
    expect(parseTraceparent(`01${TP.slice(2)}-extra`)?.spanId).toBe('00f067aa0ba902b7');
  });

  it.each([
    ['absent', null],
    ['empty', ''],
    ['version ff', `ff${TP.slice(2)}`],
    ['upper case', TP.toUpperCase()],
    ['zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
    ['zero span id', `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`],
    ['short trace id', '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01'],
    ['garbage', 'not-a-traceparent'],
  ])('rejects %s', (_, value) => {
    expect(parseTraceparent(value)).toBeNull();
  });
});

describe('createBatchTracer', () => {
  const batch = {
    messages: [{ event: { traceparent: TP, headers: {} } }],
    outcome: 'published' as const,
    startMs: 1,
    endMs: 2,
  };

  it('is a no-op when @opentelemetry/api cannot be loaded', async () => {
    const missing = Object.assign(new Error("Cannot find package '@opentelemetry/api'"), {
      code: 'ERR_MODULE_NOT_FOUND',
    });
    const tracer = await createBatchTracer(() => Promise.reject(missing));
    expect(tracer.enabled).toBe(false);
    expect(() => tracer.record(batch)).not.toThrow();
  });

  it('uses the real API when it resolves (prom-client brings it); with no SDK registered nothing is recorded', async () => {
    const tracer = await createBatchTracer();
    expect(tracer.enabled).toBe(true);
    expect(() => tracer.record(batch)).not.toThrow();
    // Nothing per event either: the links are computed only for a tracer that reads them, and
    // the API's no-op tracer does not (these messages throw when looked at).
    const untouchable = new Proxy([] as { event: never }[], {
      get: (target, key) => {
        if (key === 'length') return 1000;
        if (typeof key === 'string' && /^\d+$/.test(key)) throw new Error('a message was read');
        return Reflect.get(target, key);
      },
    });
    expect(() => tracer.record({ ...batch, messages: untouchable })).not.toThrow();
  });

  it('hands spans to the SDK registered with the real API, with its TraceState', async () => {
    const api = await import('@opentelemetry/api');
    const started: { name: string; links: { context: { traceState?: { serialize(): string } } }[] }[] = [];
    const span = { setStatus() {}, end() {} };
    api.trace.setGlobalTracerProvider({
      getTracer: () =>
        ({
          startSpan: (name: string, o: { links: [] }) => {
            started.push({ name, links: o.links });
            return span;
          },
        }) as never,
    });
    try {
      const tracer = await createBatchTracer();
      tracer.record({
        ...batch,
        messages: [{ event: { traceparent: TP, headers: { tracestate: 'vendor=x,b=2' } } }],
      });
      expect(started).toHaveLength(1);
      expect(started[0]!.links[0]!.context.traceState?.serialize()).toBe('vendor=x,b=2');
    } finally {
      api.trace.disable();
    }
  });

  it('is a no-op when the module is not the OpenTelemetry API', async () => {
    expect((await createBatchTracer(async () => ({}))).enabled).toBe(false);
  });

  it('records one producer span per batch, linked to each distinct event context', async () => {
    const spans: { name: string; options: Record<string, unknown>; status?: unknown; end?: number }[] = [];
    const api = {
      trace: {
        getTracer: () => ({
          startSpan(name: string, options: Record<string, unknown>) {
            const s: (typeof spans)[number] = { name, options };
            spans.push(s);
            return {
              setStatus: (st: unknown) => (s.status = st),
              end: (t: number) => (s.end = t),
            };
          },
        }),
      },
      createTraceState: (raw?: string) => ({ raw }),
    };
    const tracer = await createBatchTracer(async () => api);
    expect(tracer.enabled).toBe(true);
    const other = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';
    tracer.record({
      messages: [
        { traceparent: TP, headers: { tracestate: 'vendor=x' } },
        { traceparent: TP, headers: {} },
        { traceparent: other, headers: { tracestate: 42 } },
        { traceparent: null, headers: {} },
        { traceparent: 'bogus', headers: {} },
      ].map((event) => ({ event })),
      outcome: 'failed',
      error: 'broker down',
      startMs: 1000,
      endMs: 1500,
      topic: 'outbox.event.Order',
    });
    expect(spans).toHaveLength(1);
    const s = spans[0]!;
    expect(s.name).toBe('publish outbox.event.Order');
    expect(s.options).toMatchObject({
      kind: 3,
      startTime: 1000,
      attributes: {
        'outbox.outcome': 'failed',
        'messaging.batch.message_count': 5,
        'messaging.destination.name': 'outbox.event.Order',
      },
    });
    expect(s.options.links).toEqual([
      {
        context: {
          traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
          spanId: '00f067aa0ba902b7',
          traceFlags: 1,
          isRemote: true,
          traceState: { raw: 'vendor=x' },
        },
      },
      {
        context: {
          traceId: '0af7651916cd43dd8448eb211c80319c',
          spanId: 'b7ad6b7169203331',
          traceFlags: 0,
          isRemote: true,
        },
      },
    ]);
    expect(s.status).toEqual({ code: 2, message: 'broker down' });
    expect(s.end).toBe(1500);

    const many = Array.from({ length: MAX_LINKS + 10 }, (_, i) => ({
      traceparent: `00-${(i + 1).toString(16).padStart(32, '0')}-00f067aa0ba902b7-01`,
      headers: {},
    }));
    tracer.record({ ...batch, messages: many.map((event) => ({ event })) });
    expect(spans[1]!.options.links).toHaveLength(MAX_LINKS);
    expect(spans[1]!.status).toEqual({ code: 1 });
    expect(spans[1]!.name).toBe('publish');
  });

  it('lets a batch die young: recording does not keep it reachable from the old generation', () => {
    // A fresh node records 400,000 batches (each holding a 50-element array) with the real API
    // and no SDK, and counts its mark-compacts. With the span options as an object literal with
    // a getter, each options object got a map of its own in the old generation, pointing at the
    // batch through the getter's closure: every batch survived the scavenges and was promoted
    // (8 – 10 mark-compacts here). Without, the batches die in the young generation: none.
    const script = `
      import { PerformanceObserver, constants } from 'node:perf_hooks';
      import { createBatchTracer } from ${JSON.stringify(fileURLToPath(new URL('./tracing.ts', import.meta.url)))};
      let majors = 0;
      const count = (entries) => {
        for (const e of entries) if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors++;
      };
      const gcs = new PerformanceObserver((l) => count(l.getEntries()));
      gcs.observe({ entryTypes: ['gc'] });
      const tracer = await createBatchTracer();
      if (!tracer.enabled) throw new Error('no @opentelemetry/api');
      for (let i = 0; i < 400000; i++) {
        const messages = [{ event: { traceparent: null, headers: {}, pad: new Array(50).fill(i) } }];
        tracer.record({ messages, outcome: 'published', startMs: i, endMs: i });
        if (i % 1000 === 0) await new Promise((r) => setImmediate(r));
      }
      count(gcs.takeRecords()); // entries not delivered yet
      gcs.disconnect();
      process.stdout.write(String(majors));
    `;
    const majors = Number(
      execFileSync(process.execPath, ['--input-type=module', '-e', script], {
        encoding: 'utf8',
        timeout: 60_000,
      }),
    );
    expect(majors).toBeLessThanOrEqual(1);
  });

  it('no object literal in src/ defines a getter or setter (each would get an old-space map of its own)', () => {
    const src = fileURLToPath(new URL('../', import.meta.url));
    const found: string[] = [];
    for (const rel of readdirSync(src, { recursive: true, encoding: 'utf8' })) {
      if (!rel.endsWith('.ts') || rel.endsWith('.test.ts')) continue;
      const file = ts.createSourceFile(
        rel,
        readFileSync(join(src, rel), 'utf8'),
        ts.ScriptTarget.Latest,
        true,
      );
      const visit = (n: ts.Node): void => {
        if ((ts.isGetAccessor(n) || ts.isSetAccessor(n)) && ts.isObjectLiteralExpression(n.parent))
          found.push(`src/${rel}:${file.getLineAndCharacterOfPosition(n.getStart()).line + 1}`);
        ts.forEachChild(n, visit);
      };
      visit(file);
    }
    // A class's accessors are its prototype's, shared by every instance: use one instead.
    expect(found).toEqual([]);
  });
});
