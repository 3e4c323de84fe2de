/**
 * Summarises a V8 .cpuprofile (from BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=.tmp/prof"): busy
 * share by package / our folder, and the top functions by self time.
 *
 *   node bench/profile-summary.ts .tmp/prof/CPU.*.cpuprofile [--top 25] [--after '#onMessage']
 *
 * --after NAME counts only the samples from the first one whose stack holds a function NAME on
 * (e.g. the stream's first message: the drain without the process's start-up). The inclusive
 * list gives, per function of ours, the share of busy time spent in it and what it called.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

type Node = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
};
type Profile = { nodes: Node[]; samples: number[]; timeDeltas: number[] };

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' }, after: { type: 'string', default: '' } },
});

/** node_modules/<pkg>, src/<folder>, node: internals, or a V8 pseudo-frame. */
function area(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  const s = /\/(?:src|dist)\/([^/]+)\//.exec(url); // dist/: the compiled relay (bench/relay.ts)
  if (s) return `src/${s[1]}`;
  if (url.startsWith('node:')) return 'node:internal';
  return url.replace(/^.*\//, '');
}

for (const file of positionals) {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  /** The first caller outside Node's internals and native code: who asked for the work. */
  const owner = (id: number): string => {
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      const a = area(f.url, f.functionName);
      if (a !== 'node:internal' && a !== '(native)' && a !== '(anonymous)') return a;
    }
    return 'node:internal';
  };
  const owners = new Map<string, number>();
  const stackHas = (id: number, name: string): boolean => {
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur))
      if (byId.get(cur)!.callFrame.functionName === name) return true;
    return false;
  };
  const from = values.after ? p.samples.findIndex((id) => stackHas(id, values.after!)) : 0;
  if (from < 0) throw new Error(`no sample has ${values.after} on its stack`);
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => {
    if (i >= from) self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
  /** Inclusive time of our functions (src/): each counted once per sample, however deep it recurses. */
  const inclusive = new Map<string, number>();
  for (const [id, t] of self) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      if (!/\/(?:src|dist)\//.test(f.url) || /node_modules/.test(f.url)) continue;
      const key = `${f.functionName || '(anonymous)'} ${area(f.url, f.functionName)}:${f.lineNumber + 1}`;
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + t);
    }
  }
  let total = 0;
  let idle = 0;
  const areas = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, t] of self) {
    const n = byId.get(id)!;
    total += t;
    const name = n.callFrame.functionName || '(anonymous)';
    if (name === '(idle)') {
      idle += t;
      continue;
    }
    const a = area(n.callFrame.url, name);
    areas.set(a, (areas.get(a) ?? 0) + t);
    const o = name.startsWith('(') ? name : owner(id);
    owners.set(o, (owners.get(o) ?? 0) + t);
    const key = `${name} ${a}:${n.callFrame.lineNumber + 1}`;
    fns.set(key, (fns.get(key) ?? 0) + t);
  }
  const busy = total - idle;
  const pct = (t: number) => `${((t / busy) * 100).toFixed(1)} %`;
  console.log(
    `\n${file}: ${(total / 1e6).toFixed(2)} s sampled, ${((idle / total) * 100).toFixed(0)} % idle; shares of busy time:`,
  );
  for (const [a, t] of [...areas].sort((x, y) => y[1] - x[1]).slice(0, 15))
    console.log(`  ${pct(t).padStart(7)}  ${a}`);
  console.log('  by caller (Node internals and native code charged to the package that called them):');
  for (const [a, t] of [...owners].sort((x, y) => y[1] - x[1]).slice(0, 12))
    console.log(`  ${pct(t).padStart(7)}  ${a}`);
  console.log('  top functions (self time):');
  for (const [f, t] of [...fns].sort((x, y) => y[1] - x[1]).slice(0, Number(values.top)))
    console.log(`  ${pct(t).padStart(7)}  ${f}`);
  console.log('  our functions, inclusive (with what they called):');
  for (const [f, t] of [...inclusive].sort((x, y) => y[1] - x[1]).slice(0, Number(values.top)))
    console.log(`  ${pct(t).padStart(7)}  ${f}`);
}
