/**
 * Prints a .heapprofile (bench/heap-sample.ts, or Chrome DevTools' allocation sampling): the
 * sampled bytes per function (self), then the heaviest stacks.
 *
 *   node bench/heap-summary.ts .tmp/heap-123.heapprofile [--top 30] [--stacks 12]
 *
 * Compare a `promoted` profile with an `all` one of the same run: a function whose share is
 * much larger in the first makes objects that outlive the scavenges.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

type Node = {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: Node[];
};

/** Exit 64 (as the relay's CLI) with what is wrong and the usage line. */
function usageError(message: string): never {
  process.stderr.write(
    `heap-summary: ${message}\nusage: node bench/heap-summary.ts FILE.heapprofile [--top N] [--stacks N]\n`,
  );
  process.exit(64);
}
let parsed: ReturnType<typeof parse>;
const parse = () =>
  parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '30' }, stacks: { type: 'string', default: '12' } },
  });
try {
  parsed = parse();
} catch (e) {
  usageError((e as Error).message);
}
const { values, positionals } = parsed;
if (positionals.length !== 1) usageError('one .heapprofile file, please');
const count = (flag: 'top' | 'stacks') => {
  const n = Number(values[flag]);
  if (!Number.isInteger(n) || n < 0) usageError(`--${flag} ${values[flag]}: a whole number`);
  return n;
};
const topN = count('top');
const stacksN = count('stacks');
const { head } = JSON.parse(readFileSync(positionals[0]!, 'utf8')) as { head: Node };

const where = (n: Node) => {
  const u = n.callFrame.url;
  const url = u.includes('node_modules/')
    ? u.replace(/.*node_modules\//, '')
    : u.replace(/.*\/(src|bench)\//, '$1/');
  return `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`;
};
const self = new Map<string, number>();
const stacks = new Map<string, number>();
let total = 0;
const walk = (n: Node, path: string[]) => {
  const name = where(n);
  const here = [...path, name];
  if (n.selfSize > 0) {
    total += n.selfSize;
    self.set(name, (self.get(name) ?? 0) + n.selfSize);
    const key = here.slice(-6).reverse().join('\n      < ');
    stacks.set(key, (stacks.get(key) ?? 0) + n.selfSize);
  }
  for (const c of n.children) walk(c, here);
};
walk(head, []);

const kb = (b: number) => `${(b / 1024).toFixed(0).padStart(8)} kB`;
const top = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
console.log(`sampled: ${(total / 1024 / 1024).toFixed(1)} MB`);
for (const [k, v] of top(self, topN))
  console.log(`${kb(v)} ${((100 * v) / total).toFixed(1).padStart(5)} %  ${k}`);
console.log('\nheaviest stacks (innermost first):');
for (const [k, v] of top(stacks, stacksN)) console.log(`${kb(v)}  ${k}\n`);
