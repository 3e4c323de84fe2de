/**
 * deploy/kubernetes/ as a cluster would receive it: each kustomization rendered (by the small
 * kustomize below, which knows exactly the fields these files use and refuses any other; where
 * `kubectl kustomize` exists its output must be the same), every object validated against the
 * Kubernetes JSON schemas (kubernetes-models; the Prometheus Operator's for its CRDs), and the
 * properties a CD tool relies on: no Secret values, both pods Ready when healthy, a rollout that
 * completes, a PodDisruptionBudget that lets a drain through, a migrate Job, alert rules equal to
 * deploy/prometheus/alerts.yaml.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { OPTIONS } from '../src/config/options.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const K8S = join(ROOT, 'deploy/kubernetes');

// biome-ignore lint/suspicious/noExplicitAny: manifests are plain JSON trees.
type Obj = Record<string, any>;

const readYaml = (file: string): Obj[] =>
  parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);

// --- a small kustomize ---------------------------------------------------------------------

const KNOWN = new Set([
  'apiVersion',
  'kind',
  'resources',
  'components',
  'labels',
  'images',
  'namespace',
  'patches',
  'replacements',
]);

/** `path.to.*.field` → every value's parent and key (`*` = every item of a list). */
function at(obj: Obj, path: string[]): [Obj, string][] {
  if (path.length === 1) return obj && path[0]! in obj ? [[obj, path[0]!]] : [];
  const [head, ...rest] = path;
  if (head === '*') return (Array.isArray(obj) ? obj : []).flatMap((x) => at(x, rest));
  return obj?.[head!] === undefined ? [] : at(obj[head!], rest);
}

function kustomize(dir: string, into: Obj[] = []): Obj[] {
  const k = readYaml(join(dir, 'kustomization.yaml'))[0]!;
  for (const key of Object.keys(k))
    if (!KNOWN.has(key)) throw new Error(`${dir}: kustomize field ${key} not handled here`);
  const out: Obj[] = k.kind === 'Component' ? into : [];
  for (const r of k.resources ?? []) {
    const p = resolve(dir, r);
    out.push(...(statSync(p).isDirectory() ? kustomize(p) : readYaml(p)));
  }
  for (const c of k.components ?? []) kustomize(resolve(dir, c), out);
  for (const l of k.labels ?? []) {
    if (l.includeSelectors || l.includeTemplates)
      throw new Error('labels with selectors/templates not handled here');
    for (const o of out) o.metadata.labels = { ...o.metadata.labels, ...l.pairs };
  }
  if (k.namespace) for (const o of out) o.metadata.namespace = k.namespace;
  for (const img of k.images ?? []) {
    for (const o of out) {
      for (const c of [...(o.spec?.template?.spec?.containers ?? [])]) {
        const [name] = String(c.image).split(':');
        if (name === img.name) c.image = `${img.newName ?? name}:${img.newTag}`;
      }
    }
  }
  for (const p of k.patches ?? []) {
    const targets = out.filter((o) => o.kind === p.target.kind && o.metadata.name === p.target.name);
    if (targets.length !== 1)
      throw new Error(`patch target ${p.target.kind}/${p.target.name}: ${targets.length} matches`);
    for (const op of parseYaml(p.patch) as { op: string; path: string; value: unknown }[]) {
      if (op.op !== 'replace') throw new Error(`patch op ${op.op} not handled here`);
      const [parent, key] = at(targets[0]!, op.path.split('/').slice(1))[0] ?? [];
      if (!parent) throw new Error(`patch path ${op.path} not found`);
      parent[key!] = op.value;
    }
  }
  for (const r of k.replacements ?? []) {
    const src = out.find((o) => o.kind === r.source.kind && o.metadata.name === r.source.name)!;
    const [sp, sk] = at(src, r.source.fieldPath.split('.'))[0]!;
    for (const t of r.targets) {
      for (const o of out.filter((x) => x.kind === t.select.kind && x.metadata.name === t.select.name)) {
        for (const fp of t.fieldPaths) {
          for (const [parent, key] of at(o, fp.split('.'))) {
            const parts = String(parent[key]).split(t.options.delimiter);
            parts[t.options.index] = sp[sk!];
            parent[key] = parts.join(t.options.delimiter);
          }
        }
      }
    }
  }
  return out;
}

const byName = (objs: Obj[]) =>
  Object.fromEntries(objs.map((o) => [`${o.kind}/${o.metadata.name}`, o])) as Record<string, Obj>;

const KUSTOMIZATIONS = ['base', 'migrate', 'example'];
const rendered = Object.fromEntries(KUSTOMIZATIONS.map((k) => [k, kustomize(join(K8S, k))]));

// --- schemas --------------------------------------------------------------------------------

type Model = new (data: Obj) => { validate(): void };
const MODELS: Record<string, Model> = {
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor as unknown as Model,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule as unknown as Model,
};

describe('deploy/kubernetes renders', () => {
  it.each(KUSTOMIZATIONS)('%s: every object is valid against its Kubernetes JSON schema', (k) => {
    const objs = rendered[k]!;
    expect(objs.length).toBeGreaterThan(0);
    for (const o of objs) {
      const Model = MODELS[`${o.apiVersion}/${o.kind}`];
      expect(Model, `a schema for ${o.apiVersion} ${o.kind}`).toBeDefined();
      expect(() => new Model!(o).validate(), `${o.kind}/${o.metadata.name}`).not.toThrow();
    }
  });

  it('the schemas catch a broken manifest (this test would fail on one)', () => {
    const d = structuredClone(byName(rendered.base!)['Deployment/outbox-relay']!);
    d.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(() => new Deployment(d).validate()).toThrow(/containerPort must be integer/);
  });

  it('kubectl kustomize, where it is installed, renders the same objects', () => {
    const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
    if (kubectl.error) return; // no kubectl: the renderer above is the only one (see the file's comment)
    for (const k of KUSTOMIZATIONS) {
      const r = spawnSync('kubectl', ['kustomize', join(K8S, k)], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      const theirs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
      expect(byName(rendered[k]!), k).toEqual(byName(theirs));
    }
  });

  it('every manifest file is used by a kustomization', () => {
    const used = new Set<string>();
    const walk = (dir: string) => {
      const k = readYaml(join(dir, 'kustomization.yaml'))[0]!;
      used.add(join(dir, 'kustomization.yaml'));
      for (const r of [...(k.resources ?? []), ...(k.components ?? [])]) {
        const p = resolve(dir, r);
        if (statSync(p).isDirectory()) walk(p);
        else used.add(p);
      }
    };
    for (const k of KUSTOMIZATIONS) walk(join(K8S, k));
    const files = readdirSync(K8S, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name));
    expect(files.filter((f) => !used.has(f))).toEqual([]);
  });
});

describe('the base applies to a plain cluster', () => {
  const base = byName(rendered.base!);

  it('has no Secret (the user creates it) and no custom resources', () => {
    expect(Object.keys(base).sort()).toEqual([
      'ConfigMap/outbox-relay',
      'Deployment/outbox-relay',
      'PodDisruptionBudget/outbox-relay',
      'Service/outbox-relay',
    ]);
    expect(JSON.stringify(rendered.example)).not.toMatch(/"kind":"Secret"/);
  });

  it('reads the database URL from a Secret it references, and settings the relay knows', () => {
    const c = base['Deployment/outbox-relay']!.spec.template.spec.containers[0];
    expect(c.env.find((e: Obj) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef).toEqual({
      name: 'outbox-relay',
      key: 'DATABASE_URL',
    });
    const envs = new Set(OPTIONS.map((o) => o.env));
    for (const k of Object.keys(base['ConfigMap/outbox-relay']!.data)) expect(envs, k).toContain(k);
    expect(c.args).toEqual(['run']);
    expect(c.ports[0].containerPort).toBe(OPTIONS.find((o) => o.key === 'httpPort')!.default);
  });

  it('rollout semantics: both healthy pods Ready (/healthz), surge before stop, a PDB that lets a drain evict one', () => {
    const dep = base['Deployment/outbox-relay']!;
    const c = dep.spec.template.spec.containers[0];
    // /readyz is 200 on the leader only; readiness on it would leave one pod unready for ever,
    // and `kubectl rollout status` and Argo CD's health would never see a healthy Deployment.
    expect(c.readinessProbe.httpGet.path).toBe('/healthz');
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
    expect(dep.spec.replicas).toBe(2);
    expect(dep.spec.strategy.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    const pdb = base['PodDisruptionBudget/outbox-relay']!;
    expect(pdb.spec).toMatchObject({ maxUnavailable: 1 });
    expect(pdb.spec.minAvailable).toBeUndefined();
    // The drain waits for the graceful stop: the grace period covers the drain timeout.
    const shutdownMs = OPTIONS.find((o) => o.key === 'shutdownTimeoutMs')!.default as number;
    expect(dep.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(shutdownMs);
    expect(base['Service/outbox-relay']!.spec.publishNotReadyAddresses).toBe(true);
  });
});

describe('the migrate Job and the optional components', () => {
  it('migrate runs `migrate` as the owner role from its own Secret, before an Argo CD sync', () => {
    const job = byName(rendered.migrate!)['Job/outbox-relay-migrate']!;
    const c = job.spec.template.spec.containers[0];
    expect(c.args).toEqual(['migrate']);
    expect(c.env.find((e: Obj) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef.name).toBe(
      'outbox-relay-migrate',
    );
    expect(job.metadata.annotations['argocd.argoproj.io/hook']).toBe('PreSync');
    expect(job.spec.template.spec.restartPolicy).toBe('Never');
  });

  it('the Prometheus Operator component: a ServiceMonitor and the alert rules of alerts.yaml, runbook base configurable', () => {
    const ex = byName(rendered.example!);
    expect(ex['ServiceMonitor/outbox-relay']).toBeDefined();
    const rule = ex['PrometheusRule/outbox-relay']!;
    const alerts = parseYaml(readFileSync(join(ROOT, 'deploy/prometheus/alerts.yaml'), 'utf8'))
      .groups as Obj[];
    const strip = (groups: Obj[]) =>
      groups.map((g) => ({
        ...g,
        rules: g.rules.map((r: Obj) => ({
          ...r,
          annotations: { ...r.annotations, runbook_url: r.annotations.runbook_url.split('#')[1] },
        })),
      }));
    expect(strip(rule.spec.groups)).toEqual(strip(alerts));
    for (const r of rule.spec.groups.flatMap((g: Obj) => g.rules))
      expect(r.annotations.runbook_url).toMatch(
        /^https:\/\/wiki\.example\.com\/outbox\/operations#[a-z0-9-]+$/,
      );
    // Without the overlay's base URL, the component links this version's docs.
    const component = readYaml(join(K8S, 'components/prometheus-operator/prometheusrule.yaml'))[0]!;
    expect(component.spec.groups).toEqual(alerts);
    // The example is the documented overlay: its namespace and image reach every object.
    for (const o of rendered.example!) expect(o.metadata.namespace).toBe('orders');
    expect(ex['Deployment/outbox-relay']!.spec.template.spec.containers[0].image).toBe(
      'registry.example.com/pg-outbox-relay:0.1.0',
    );
  });

  it('docs/deployment.md documents the commands and files', () => {
    const doc = readFileSync(join(ROOT, 'docs/deployment.md'), 'utf8');
    for (const s of [
      'kubectl create secret generic outbox-relay',
      'kubectl create secret generic outbox-relay-migrate',
      'deploy/kubernetes/migrate',
      'kubectl rollout status deployment/outbox-relay',
      'components/prometheus-operator',
      'runbookBaseUrl',
    ])
      expect(doc, s).toContain(s);
    expect(existsSync(join(K8S, 'base/secret.yaml'))).toBe(false);
  });
});
