/**
 * The relay's CPU by stage, from a V8 .cpuprofile of a live pass (`npm run bench -- --live-profile`
 * runs the live relay under node --cpu-prof). Each sample is charged to the stage of the innermost
 * frame on its stack that a rule below knows (a library or Node internal is charged to the code of
 * ours that called it); samples with none are "other", the V8 pseudo-frames "(garbage collector)"
 * and "(program)" are "gc" and "other", "(idle)" is not counted.
 *
 * The rules, by the frame's file (both layouts of the Kafka sink: src/sinks/kafka*.ts and
 * src/sinks/kafka/*):
 *   status    `#sendStatus` (src/stream/session.ts) and `sendStatus` (src/replication/connection.ts)
 *   progress  src/lifecycle/progress.ts, src/outcome/record.ts; pg's own frames with no frame of
 *             ours on the stack (a statement's reply read from the socket: the replication
 *             stream's bytes go through src/replication/copy-reader.ts)
 *   decode    src/replication/* (the copy reader, the pgoutput decoder)
 *   route     src/route/*
 *   encode    the Produce encoder (produce-encoder, crc32c, kafka-codecs under src/sinks/);
 *             kafkajs' protocol encoders (node_modules/kafkajs/src/protocol/ but its decoders)
 *   send      the rest of src/sinks/ (the Kafka sink, its lanes and acks); the rest of kafkajs
 *   gc, other
 */

export const STAGES = ['decode', 'route', 'encode', 'send', 'progress', 'status', 'gc', 'other'] as const;
export type Stage = (typeof STAGES)[number];

export type Frame = { functionName: string; url: string };

/**
 * A frame's URL as its source's: the compiled relay's dist/X.js (the bench runs it by default,
 * bench/relay.ts useRelayFrom) is src/X.ts, so the rules below hold for either.
 */
export function asSource(url: string): string {
  if (/node_modules\//.test(url)) return url;
  return url.replace(/\/dist\/(.*)\.js$/, '/src/$1.ts');
}

/** The stage a frame's rule names, or null: ask its caller. */
export function frameStage(f: Frame): Stage | null {
  const url = asSource(f.url);
  if (!url) {
    if (f.functionName === '(garbage collector)') return 'gc';
    return null;
  }
  const kafkajs = /node_modules\/kafkajs\/(.*)$/.exec(url);
  if (kafkajs)
    return /^src\/protocol\//.test(kafkajs[1]!) && !/decoder|response/.test(kafkajs[1]!) ? 'encode' : 'send';
  if (/node_modules\//.test(url) || !/\/src\//.test(url)) return null;
  const file = url.slice(url.lastIndexOf('/src/') + 1);
  if (
    (f.functionName === '#sendStatus' && file.endsWith('stream/session.ts')) ||
    (f.functionName === 'sendStatus' && file.startsWith('src/replication/'))
  )
    return 'status';
  if (file === 'src/lifecycle/progress.ts' || file === 'src/outcome/record.ts') return 'progress';
  if (file.startsWith('src/replication/')) return 'decode';
  if (file.startsWith('src/route/')) return 'route';
  if (file.startsWith('src/sinks/'))
    return /(^|\/)(produce-encoder|crc32c|kafka-codecs|codecs)\.ts$/.test(file) ? 'encode' : 'send';
  return null;
}

/** A sample's stage; `stack` from the sampled frame (leaf) to the root. */
export function stageOf(stack: Frame[]): Stage | null {
  if (stack[0]?.functionName === '(idle)') return null;
  for (const f of stack) {
    const s = frameStage(f);
    if (s) return s;
  }
  const ours = stack.some((f) => /\/src\//.test(asSource(f.url)) && !/node_modules\//.test(f.url));
  if (!ours && stack.some((f) => /node_modules\/pg(-protocol)?\//.test(f.url))) return 'progress';
  return 'other';
}

type ProfileNode = { id: number; callFrame: Frame; children?: number[] };
export type CpuProfile = {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
};

/**
 * Microseconds of samples per stage, counting only the samples inside `windows` ([start, end]
 * on the profile's clock: CLOCK_MONOTONIC µs, process.hrtime.bigint() / 1000 in another process).
 */
export function stageTimes(p: CpuProfile, windows: [number, number][]): Record<Stage, number> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const memo = new Map<number, Stage | null>();
  const stage = (id: number): Stage | null => {
    if (!memo.has(id)) {
      const stack: Frame[] = [];
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur))
        stack.push(byId.get(cur)!.callFrame);
      memo.set(id, stageOf(stack));
    }
    return memo.get(id)!;
  };
  const times = Object.fromEntries(STAGES.map((s) => [s, 0])) as Record<Stage, number>;
  let t = p.startTime;
  p.samples.forEach((id, i) => {
    const dt = p.timeDeltas[i] ?? 0;
    t += dt;
    if (!windows.some(([a, b]) => t >= a && t <= b)) return;
    const s = stage(id);
    if (s) times[s] += dt;
  });
  return times;
}

/** Each stage's share of the counted samples (0 – 1; all 0 if none were counted). */
export function shares(times: Record<Stage, number>): Record<Stage, number> {
  const total = STAGES.reduce((n, s) => n + times[s], 0);
  return Object.fromEntries(STAGES.map((s) => [s, total > 0 ? times[s] / total : 0])) as Record<
    Stage,
    number
  >;
}
