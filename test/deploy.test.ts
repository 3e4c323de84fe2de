/**
 * deploy/ and docs/metrics.md against the code: the Dockerfile builds what the package builds
 * and runs it unprivileged, the manifests parse and agree with the CLI's options, every metric
 * an alert, a dashboard panel or the docs name is one the relay registers, and the alert rules
 * pass promtool (required: `apt-get install prometheus` provides it).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { OPTIONS } from '../src/config/options.ts';
import { DEFAULT_KAFKA_VERSION } from '../src/dev/local-kafka.ts';
import { collectProcessMetrics } from '../src/http/server.ts';
import { RelayMetrics } from '../src/observability/metrics.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const optionDefault = (key: string) => OPTIONS.find((o) => o.key === key)!.default;

// --- metric names ---------------------------------------------------------------------------

interface Described {
  name: string;
  type: string;
  labelNames: string[];
}

function describedMetrics(registry: Registry): Described[] {
  return registry.getMetricsAsArray() as unknown as Described[];
}

/** The series names a registry exposes (a histogram is only its _bucket, _sum and _count). */
function seriesNames(registry: Registry): Set<string> {
  const out = new Set<string>();
  for (const m of describedMetrics(registry)) {
    if (m.type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(m.name + s);
    else if (m.type === 'summary') for (const s of ['', '_sum', '_count']) out.add(m.name + s);
    else out.add(m.name);
  }
  return out;
}

function knownSeries(): Set<string> {
  const process = new Registry();
  collectProcessMetrics(process);
  return new Set([...seriesNames(new RelayMetrics().registry), ...seriesNames(process), 'up']);
}

const PROMQL_FUNCTIONS = new Set(
  (
    'abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min count_over_time ' +
    'day_of_month day_of_week day_of_year days_in_month delta deriv exp floor histogram_quantile ' +
    'histogram_count histogram_sum histogram_fraction holt_winters hour idelta increase irate label_join ' +
    'label_replace last_over_time ln log2 log10 max_over_time min_over_time minute month predict_linear ' +
    'present_over_time quantile_over_time rate resets round scalar sgn sort sort_desc sqrt ' +
    'stddev_over_time stdvar_over_time sum_over_time time timestamp vector year ' +
    'sum min max avg group stddev stdvar count count_values bottomk topk quantile'
  ).split(' '),
);
const PROMQL_WORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan', 'by', 'without']);

/**
 * Metric names in a PromQL expression (Grafana's variables and label_values() allowed):
 * strings, label matchers, grouping clauses and ranges removed, then every identifier that is
 * not a function, an aggregation or a keyword is a metric name. An unknown function also
 * comes back, as `fn(`, so a typo cannot hide a metric.
 */
function metricNamesIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\blabel_values\s*\(([^,()]*)(?:\{[^}]*\})?\s*,[^)]*\)/g, '$1')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\$\{[^}]*\}|\$\w+/g, '')
    .replace(/\boffset\s+-?\w+/g, '');
  const out: string[] = [];
  for (const m of bare.matchAll(/(?<![\w.:])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    const [, name, call] = m as unknown as [string, string, string | undefined];
    if (call) {
      if (!PROMQL_FUNCTIONS.has(name)) out.push(`${name}(`);
    } else if (!PROMQL_WORDS.has(name.toLowerCase()) && !/^group_(left|right)$/.test(name)) {
      out.push(name);
    }
  }
  return [...new Set(out)];
}

function alertRules(): { alert: string; expr: string; annotations: Record<string, string> }[] {
  const doc = parseYaml(read('deploy/prometheus/alerts.yaml')) as {
    groups: { rules: { alert: string; expr: string; annotations: Record<string, string> }[] }[];
  };
  return doc.groups.flatMap((g) => g.rules);
}

function dashboard() {
  return JSON.parse(read('deploy/grafana/outbox-relay.json')) as Record<string, unknown>;
}

/** Every PromQL text of the dashboard: panel targets, and query variables. */
function dashboardExprs(): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k === 'expr' && typeof x === 'string') out.push(x);
        else walk(x);
      }
    }
  };
  walk(dashboard().panels);
  const vars = (dashboard().templating as { list: { type: string; query: unknown }[] }).list;
  for (const v of vars.filter((x) => x.type === 'query')) {
    out.push(typeof v.query === 'string' ? v.query : (v.query as { query: string }).query);
  }
  return out;
}

function unknownMetrics(exprs: string[]): string[] {
  const known = knownSeries();
  return [...new Set(exprs.flatMap(metricNamesIn))].filter((n) => !known.has(n));
}

describe('metric names outside the code', () => {
  it('are extracted from PromQL as this test reads it', () => {
    expect(
      metricNamesIn(
        'sum by (topic) (rate(foo_total{a="b", c=~"x|y"}[5m] offset 1h)) / on(job) group_left bar > 1e3 and absent(baz)',
      ),
    ).toEqual(['foo_total', 'bar', 'baz']);
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le) (rate(x_bucket{i=~"$instance"}[$__rate_interval])))',
      ),
    ).toEqual(['x_bucket']);
    expect(metricNamesIn('label_values(outbox_relay_state{job="outbox-relay"}, instance)')).toEqual([
      'outbox_relay_state',
    ]);
    expect(metricNamesIn('rat(outbox_inflight_events)')).toEqual(['rat(', 'outbox_inflight_events']);
    expect(unknownMetrics(['sum(outbox_no_such_metric) + up + outbox_inflight_events'])).toEqual([
      'outbox_no_such_metric',
    ]);
  });

  it('alerts use only metrics the relay registers, plus up', () => {
    const exprs = alertRules().map((r) => r.expr);
    expect(exprs.length).toBeGreaterThan(0);
    expect(unknownMetrics(exprs)).toEqual([]);
  });

  it('dashboard panels and variables use only metrics the relay registers, plus up and process metrics', () => {
    const exprs = dashboardExprs();
    expect(exprs.length).toBeGreaterThan(10);
    expect(unknownMetrics(exprs)).toEqual([]);
  });

  it('docs/metrics.md has a row for every outbox_* metric with its type and labels, and no other', () => {
    const doc = read('docs/metrics.md');
    const rows = new Map<string, string[]>();
    for (const line of doc.split('\n')) {
      const cells = line.split('|').map((c) => c.trim());
      const name = /^`(outbox_\w+)`$/.exec(cells[1] ?? '')?.[1];
      if (name) rows.set(name, cells);
    }
    const registered = describedMetrics(new RelayMetrics().registry).filter((m) =>
      m.name.startsWith('outbox_'),
    );
    for (const m of registered) {
      const cells = rows.get(m.name);
      expect(cells, `docs/metrics.md lacks a row for ${m.name}`).toBeDefined();
      expect(cells![2], `type of ${m.name}`).toBe(m.type);
      const labels = [...(cells![3] ?? '').matchAll(/`(\w+)`/g)].map((x) => x[1]);
      expect(labels.sort(), `labels of ${m.name}`).toEqual([...m.labelNames].sort());
    }
    expect([...rows.keys()].filter((n) => !registered.some((m) => m.name === n))).toEqual([]);
  });
});

// --- Dockerfile -----------------------------------------------------------------------------

interface Instruction {
  op: string;
  args: string;
  stage: number;
}

function dockerfile(): Instruction[] {
  const joined = read('deploy/Dockerfile')
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\n/g, ' ');
  let stage = -1;
  const out: Instruction[] = [];
  for (const line of joined.split('\n')) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const op = m[1]!.toUpperCase();
    if (op === 'FROM') stage++;
    out.push({ op, args: m[2]!.trim(), stage });
  }
  return out;
}

const gitTracked = (path: string) =>
  execFileSync('git', ['ls-files', '--', path], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';

describe('deploy/Dockerfile', () => {
  const ins = dockerfile();
  const last = Math.max(...ins.map((i) => i.stage));
  const final = ins.filter((i) => i.stage === last);
  const one = (op: string) => {
    const found = final.filter((i) => i.op === op);
    expect(found, `exactly one ${op} in the final stage`).toHaveLength(1);
    return found[0]!.args;
  };

  it('is multi-stage on node:24-slim; the runtime installs production dependencies only, from the lockfile', () => {
    const froms = ins.filter((i) => i.op === 'FROM').map((i) => i.args);
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const f of froms) expect(f).toMatch(/^node:24-slim\b/);
    const runs = ins.filter((i) => i.op === 'RUN').map((i) => i.args);
    // No install script anywhere: no native builds, no download of the node devDependency.
    for (const r of runs.filter((x) => /\bnpm ci\b/.test(x))) expect(r).toContain('--ignore-scripts');
    expect(
      final
        .filter((i) => i.op === 'RUN')
        .map((i) => i.args)
        .join('\n'),
    ).toMatch(/npm ci --omit=dev\b/);
    // The build stage builds as a checkout does (npm run build), with scripts that exist.
    expect(runs.join('\n')).toMatch(/npm run build\b/);
    const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>;
    for (const r of runs)
      for (const [, s] of r.matchAll(/npm run (\S+)/g)) expect(scripts).toHaveProperty(s!);
    // test/packaging.test.ts replays these steps in clean directories; they run relative to WORKDIR.
    for (const r of runs) expect(r, r).not.toMatch(/(^|\s)\/(?!dev\/null)/);
  });

  it('puts `outbox-relay` on PATH: the entry point is the package bin, which runs what tsconfig.build.json makes of src/cli/main.ts', () => {
    expect(JSON.parse(one('ENTRYPOINT'))).toEqual(Object.keys(JSON.parse(read('package.json')).bin));
    const build = JSON.parse(read('tsconfig.build.json')) as {
      compilerOptions: { outDir: string; rootDir: string };
    };
    const { outDir, rootDir } = build.compilerOptions;
    const target = /import '\.\.\/([^']+)'/.exec(read('bin/outbox-relay.js'))?.[1] ?? '';
    expect(target.startsWith(`${outDir}/`), `${target} is under outDir ${outDir}`).toBe(true);
    const source = `${rootDir}${target.slice(outDir.length).replace(/\.js$/, '.ts')}`;
    expect(source).toBe('src/cli/main.ts');
    expect(existsSync(join(ROOT, source))).toBe(true);
    expect(final.some((i) => i.op === 'RUN' && i.args.includes('bin/outbox-relay.js'))).toBe(true);
    expect(final.some((i) => i.op === 'ENV' && /^PATH=/.test(i.args))).toBe(true);
    expect(JSON.parse(one('CMD'))).toEqual(['run']);
  });

  it('copies only sources that exist in a fresh checkout, and build outputs from its build stage', () => {
    const stages = ins.filter((i) => i.op === 'FROM').map((i) => /\bAS\s+(\S+)/i.exec(i.args)?.[1]);
    const workdir = (stage: number) =>
      ins.filter((i) => i.stage === stage && i.op === 'WORKDIR').at(-1)?.args;
    const outDir = JSON.parse(read('tsconfig.build.json')).compilerOptions.outDir as string;
    const copies = ins.filter((i) => i.op === 'COPY');
    expect(copies.length).toBeGreaterThan(0);
    for (const c of copies) {
      const words = c.args.split(/\s+/);
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
      const paths = words.filter((w) => !w.startsWith('--'));
      const sources = paths.slice(0, -1);
      if (from) {
        const stage = stages.indexOf(from);
        expect(stage, `COPY --from=${from} names an earlier stage`).toBeGreaterThanOrEqual(0);
        expect(stage).toBeLessThan(c.stage);
        for (const s of sources) {
          expect([`${workdir(stage)}/${outDir}`], `COPY --from source ${s}`).toContain(s);
        }
      } else {
        for (const s of sources) {
          expect(existsSync(join(ROOT, s)), `COPY source ${s} exists`).toBe(true);
          expect(gitTracked(s), `COPY source ${s} is tracked by git (a fresh clone has it)`).toBe(true);
        }
      }
    }
    // migrate reads sql/ next to the code at run time (src/store/migrate.ts, SQL_DIR).
    expect(final.some((i) => i.op === 'COPY' && /^sql\s/.test(i.args))).toBe(true);
  });

  it('runs as a non-root user, exposes the default HTTP port, and health-checks /healthz', () => {
    const user = one('USER');
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    const order = final.map((i) => i.op);
    expect(order.indexOf('USER')).toBeLessThan(order.indexOf('ENTRYPOINT'));
    expect(one('EXPOSE')).toBe(String(optionDefault('httpPort')));
    const health = one('HEALTHCHECK');
    expect(health).toMatch(/CMD \["node", "-e", .*fetch\(.*\/healthz/);
    expect(health).toContain(String(optionDefault('httpPort')));
  });
});

// --- YAML and manifests ---------------------------------------------------------------------

function yamlFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
    .map((e) => posix.join(posix.relative(ROOT, e.parentPath).split('\\').join('/'), e.name));
}

interface ComposeService {
  image?: string;
  command?: string[];
  build?: { context: string; dockerfile: string };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
  environment?: Record<string, string>;
}

/** Merge keys (`<<: *anchor`) on, as Docker Compose reads them. */
function docs(path: string): Record<string, unknown>[] {
  return parseAllDocuments(read(path), { merge: true }).map((d) => d.toJS() as Record<string, unknown>);
}

describe('deploy/ YAML', () => {
  it('every YAML file parses', () => {
    const files = yamlFiles('deploy');
    expect(files).toContain('deploy/compose.yaml');
    expect(files).toContain('deploy/kubernetes/base/deployment.yaml');
    for (const f of files) {
      const errors = parseAllDocuments(read(f), { merge: true }).flatMap((d) =>
        d.errors.map((e) => e.message),
      );
      expect(errors, f).toEqual([]);
    }
  });

  // deploy/kubernetes/: test/kubernetes.test.ts renders and validates it.

  it('compose has the playground services and mounts only files that exist', () => {
    const compose = docs('deploy/compose.yaml')[0] as unknown as { services: Record<string, ComposeService> };
    const s = compose.services;
    expect(Object.keys(s).sort()).toEqual(['grafana', 'kafka', 'migrate', 'postgres', 'prometheus', 'relay']);
    expect(s.postgres?.image).toMatch(/^postgres:17/);
    expect(s.postgres?.command?.join(' ')).toContain('wal_level=logical');
    // The version the suite runs by default, and the console on (docs/console.md).
    expect(s.kafka?.image).toBe(`apache/kafka:${DEFAULT_KAFKA_VERSION}`);
    expect(s.relay?.environment?.OUTBOX_CONSOLE).toBe('true');
    expect(String(s.relay?.environment?.OUTBOX_CONSOLE_TOKEN ?? '').length).toBeGreaterThanOrEqual(16);
    expect(s.migrate?.command).toEqual(['migrate']);
    expect(s.relay?.depends_on?.migrate?.condition).toBe('service_completed_successfully');
    const build = s.migrate!.build!;
    expect(existsSync(join(ROOT, 'deploy', build.context, build.dockerfile))).toBe(true);
    for (const [name, svc] of Object.entries(s)) {
      for (const v of svc.volumes ?? []) {
        const src = v.split(':')[0]!;
        if (src.startsWith('.')) expect(existsSync(join(ROOT, 'deploy', src)), `${name}: ${src}`).toBe(true);
      }
    }
    const prom = docs('deploy/prometheus/prometheus.yml')[0] as { scrape_configs: { job_name: string }[] };
    expect(prom.scrape_configs.map((c) => c.job_name)).toContain('outbox-relay');
  });

  it('no alert names a scrape job, and every runbook link is absolute, to this version’s docs/operations.md', () => {
    const version = JSON.parse(read('package.json')).version as string;
    const base = `https://unpkg.com/pg-outbox-relay@${version}/docs/operations.md#`;
    for (const r of alertRules()) {
      expect(r.expr, r.alert).not.toMatch(/\bjob\s*=~?\s*"/);
      expect(r.annotations.runbook_url?.startsWith(base), `${r.alert}: ${r.annotations.runbook_url}`).toBe(
        true,
      );
      expect(r.annotations.runbook_url!.slice(base.length), r.alert).toMatch(/^[a-z0-9-]+$/);
      expect(r.annotations.summary, r.alert).toBeTruthy();
    }
  });

  it('alerts on dead-letter publish failures', () => {
    const dlq = alertRules().find((r) => r.expr.includes('outbox_dlq_publish_failed_total'));
    expect(dlq?.alert).toBe('OutboxDeadLetterPublishFailing');
  });

  it('every runbook link lands on a section of docs/operations.md that names the alert', () => {
    const runbook = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const sections = new Map<string, string>();
    const parts = runbook.split(/<a id="([a-z0-9-]+)"><\/a>/);
    for (let i = 1; i < parts.length; i += 2) sections.set(parts[i]!, parts[i + 1]!);
    for (const r of alertRules()) {
      const anchor = (r.annotations.runbook_url ?? '').split('#')[1]!;
      const section = sections.get(anchor);
      expect(section, `${r.alert}: no <a id="${anchor}"> in docs/operations.md`).toBeDefined();
      expect(section, `${r.alert} is named in its runbook section`).toContain(r.alert);
    }
  });
});

// --- promtool -------------------------------------------------------------------------------

function promtool(args: string[]): { ok: boolean; output: string } {
  const r = spawnSync('promtool', args, { cwd: ROOT, encoding: 'utf8' });
  if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(
      'promtool is not installed: `apt-get install prometheus` (Debian/Ubuntu) provides it; the alert rule tests need it',
    );
  }
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

// promtool comes from Debian's prometheus package, which .ci/run installs. On a developer's machine
// without it these three are skipped, loudly; in CI (CI=true) they run and fail with the install hint.
const HAVE_PROMTOOL = !spawnSync('promtool', ['--version']).error;
if (!HAVE_PROMTOOL && !process.env.CI) {
  console.warn(
    'promtool not found: skipping the alert-rule and dashboard PromQL checks (apt-get install prometheus); CI runs them',
  );
}

describe.skipIf(!HAVE_PROMTOOL && !process.env.CI)('promtool', () => {
  it('check rules deploy/prometheus/alerts.yaml', () => {
    const r = promtool(['check', 'rules', 'deploy/prometheus/alerts.yaml']);
    expect(r.ok, r.output).toBe(true);
  });

  it('test rules deploy/prometheus/alerts.test.yaml, which covers every alert', () => {
    const tests = read('deploy/prometheus/alerts.test.yaml');
    for (const r of alertRules())
      expect(tests, `no test of ${r.alert}`).toMatch(new RegExp(`alertname: ${r.alert}\\s`));
    const r = promtool(['test', 'rules', 'deploy/prometheus/alerts.test.yaml']);
    expect(r.ok, r.output).toBe(true);
  });

  it('every dashboard query is valid PromQL', () => {
    // As recording rules, with Grafana's variables replaced, so promtool parses them.
    const dir = mkdtempSync(join(tmpdir(), 'dashboard-promql-'));
    try {
      const rules = dashboardExprs()
        .filter((e) => !e.startsWith('label_values('))
        .map((e, i) => ({
          record: `dashboard:query_${i}`,
          expr: e.replace(/\$__rate_interval/g, '5m').replace(/\$\w+/g, '.*'),
        }));
      const file = join(dir, 'dashboard.rules.json');
      writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
      const r = promtool(['check', 'rules', file]);
      expect(r.ok, r.output).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
