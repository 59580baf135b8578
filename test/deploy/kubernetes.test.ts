// deploy/kubernetes rendered offline (test/deploy/kustomize.ts, the base and the production overlay)
// and every object checked against the Kubernetes API schemas of the npm package kubernetes-models:
// its validators (generated from the Kubernetes OpenAPI specification: types, required fields,
// formats) and, since those let unknown fields pass, its TypeScript types, whose excess-property
// check catches a misspelt field the way `kubectl apply --validate=strict` does. Then what the
// objects must agree on: probes on routes the server has, the grace period over the drain, selectors,
// ports, the keys' Secret in the format of `keywarden secrets export`, and settings config.ts knows.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { SHARED_KEY_SETTINGS } from '../../src/platform/crypto/secrets.js';
import { render, strategicMerge, type K8sObject } from './kustomize.js';

const root = path.resolve(import.meta.dirname, '../..');
const K8S = path.join(root, 'deploy/kubernetes');
const keysEnv = execFileSync(path.join(root, 'deploy/compose/make-keys.sh'), { encoding: 'utf8' });
const overlayFiles = {
  'keys.env': keysEnv,
  'backends.env': fs.readFileSync(path.join(K8S, 'overlays/production/backends.env.example'), 'utf8'),
};
const base = render(path.join(K8S, 'base'));
const production = render(path.join(K8S, 'overlays/production'), overlayFiles);

/** kubernetes-models' module of an object: `apps/v1` + Deployment -> kubernetes-models/apps/v1/Deployment. */
const modelPath = (o: K8sObject) => `kubernetes-models/${o.apiVersion.includes('/') ? o.apiVersion : `v1`}/${o.kind}`;

async function schemaErrors(o: K8sObject): Promise<string | undefined> {
  const mod = (await import(modelPath(o))) as Record<string, new (d: unknown) => { validate(): void }>;
  try {
    new mod[o.kind]!(o).validate();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Type-checks the objects as literals of kubernetes-models' interfaces; returns the diagnostics. */
function strictFieldErrors(objects: K8sObject[]): string[] {
  const dir = path.join(root, 'test/deploy');
  const file = path.join(dir, '__k8s_objects__.ts');
  const source =
    objects.map((o, i) => `import type { I${o.kind} as T${i} } from '${modelPath(o)}';`).join('\n') +
    '\n' +
    objects.map((o, i) => `export const o${i}: T${i} = ${JSON.stringify(o, null, 2)};`).join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) =>
    path.resolve(name) === file ? ts.createSourceFile(name, source, lang) : getSourceFile(name, lang, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => path.resolve(name) === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts
    .getPreEmitDiagnostics(program, program.getSourceFile(file))
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

const find = (objs: K8sObject[], kind: string) => {
  const o = objs.find((x) => x.kind === kind);
  if (!o) throw new Error(`no ${kind}`);
  return o as K8sObject & Record<string, any>;
};
const known = (() => {
  const src = fs.readFileSync(path.join(root, 'src/config.ts'), 'utf8');
  const names = new Set<string>();
  for (const m of src.matchAll(/\b(?:int|opt)\(env, '([A-Z_][A-Z0-9_]*)'/g)) names.add(m[1]!);
  for (const m of src.matchAll(/\benv\.([A-Z_][A-Z0-9_]*)/g)) names.add(m[1]!);
  return names;
})();
const routes = fs.readFileSync(path.join(root, 'src/modules/system/system.routes.ts'), 'utf8');

describe('Kubernetes manifests (deploy/kubernetes)', () => {
  it('render into the objects an operator needs', () => {
    const kinds = (objs: K8sObject[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kinds(base)).toEqual([
      'ConfigMap/keywarden-config',
      'Deployment/keywarden',
      'HorizontalPodAutoscaler/keywarden',
      'Ingress/keywarden',
      'PodDisruptionBudget/keywarden',
      'Service/keywarden',
    ]);
    expect(kinds(production)).toEqual([...kinds(base), 'Secret/keywarden-backends', 'Secret/keywarden-keys'].sort());
    for (const o of production) expect(o.metadata.namespace).toBe('keywarden');
    expect(find(production, 'Deployment').spec.template.spec.containers[0].image).toBe(
      'registry.example.com/keywarden:0.1.0',
    );
    expect(find(production, 'Ingress').spec.rules[0].host).toBe('licenses.example.org');
    expect(find(production, 'ConfigMap').data.PUBLIC_URL).toBe('https://licenses.example.org');
    // the patch changed the host only: the base's other settings are still there
    expect(find(production, 'ConfigMap').data.WORKERS).toBe('2');
  });

  it('every object passes the Kubernetes schema, with no unknown field', async () => {
    for (const o of [...base, ...production])
      expect(await schemaErrors(o), `${o.kind}/${o.metadata.name}`).toBeUndefined();
    expect(strictFieldErrors([...base, ...production])).toEqual([]);
  }, 60_000);

  it('the checks themselves catch a wrong type and a misspelt field', async () => {
    const d = find(base, 'Deployment');
    const wrongType = strategicMerge(d, { spec: { template: { spec: { terminationGracePeriodSeconds: '45' } } } });
    expect(await schemaErrors(wrongType as K8sObject)).toMatch(/terminationGracePeriodSeconds must be integer/);
    const misspelt = strategicMerge(d, {
      spec: {
        template: {
          spec: { containers: [{ name: 'keywarden', readinesProbe: { httpGet: { path: '/readyz', port: 'http' } } }] },
        },
      },
    });
    expect(strictFieldErrors([misspelt as K8sObject]).join('\n')).toMatch(/readinesProbe/);
  }, 60_000);

  it('probes ask routes the server has; the grace period covers the preStop pause and the drain', () => {
    const d = find(production, 'Deployment');
    const pod = d.spec.template.spec;
    const c = pod.containers[0];
    expect(c.readinessProbe.httpGet.path).toBe('/readyz');
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
    for (const p of ['/readyz', '/healthz']) expect(routes).toContain(`path: '${p}'`);
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe])
      expect(c.ports.map((p: { name: string }) => p.name)).toContain(probe.httpGet.port);
    const config = find(production, 'ConfigMap').data as Record<string, string>;
    const preStopS = Number(c.lifecycle.preStop.exec.command[1]);
    expect(c.lifecycle.preStop.exec.command[0]).toBe('sleep');
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(
      preStopS * 1000 + Number(config.SHUTDOWN_TIMEOUT_MS) + 15_000,
    );
    // the image's user, not root; rolling upgrades never go below the current count
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 });
    expect(d.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
    // the HPA owns the replica count
    expect(d.spec.replicas).toBeUndefined();
  });

  it('Service, Ingress, PDB and HPA point at the Deployment; each worker has its cluster port', () => {
    const d = find(production, 'Deployment');
    const labels = d.spec.template.metadata.labels as Record<string, string>;
    expect(d.spec.selector.matchLabels).toEqual(labels);
    const svc = find(production, 'Service');
    for (const [k, v] of Object.entries(svc.spec.selector as Record<string, string>)) expect(labels[k]).toBe(v);
    const c = d.spec.template.spec.containers[0];
    for (const p of svc.spec.ports) expect(c.ports.map((x: { name: string }) => x.name)).toContain(p.targetPort);
    const ing = find(production, 'Ingress');
    const backend = ing.spec.rules[0].http.paths[0].backend.service;
    expect(backend.name).toBe(svc.metadata.name);
    expect(svc.spec.ports.map((p: { name: string }) => p.name)).toContain(backend.port.name);
    expect(ing.spec.tls[0].hosts).toEqual([ing.spec.rules[0].host]);
    // the client channel (WebSocket) and event streams stay open for an hour; bodies up to 5 MiB
    expect(ing.metadata.annotations).toMatchObject({
      'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600',
      'nginx.ingress.kubernetes.io/proxy-send-timeout': '3600',
      'nginx.ingress.kubernetes.io/proxy-body-size': '5m',
      'nginx.ingress.kubernetes.io/proxy-buffering': 'off',
    });
    const pdb = find(production, 'PodDisruptionBudget');
    expect(pdb.spec.selector.matchLabels).toEqual(labels);
    const hpa = find(production, 'HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: d.metadata.name });
    expect(hpa.spec.metrics[0].resource.name).toBe('cpu');
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    const config = find(production, 'ConfigMap').data as Record<string, string>;
    const clusterPorts = c.ports
      .filter((p: { name: string }) => p.name.startsWith('cluster-'))
      .map((p: { containerPort: number }) => p.containerPort);
    const first = Number(config.CLUSTER_PORT);
    expect(clusterPorts).toEqual(Array.from({ length: Number(config.WORKERS) }, (_, i) => first + i));
  });

  it('the pods get the shared keys from a Secret and only settings src/config.ts knows; they load', () => {
    const d = find(production, 'Deployment');
    const c = d.spec.template.spec.containers[0];
    const byName = (kind: string, name: string) =>
      production.find((o) => o.kind === kind && o.metadata.name === name) as
        (K8sObject & { data: Record<string, string> }) | undefined;
    const env: Record<string, string> = {};
    for (const from of c.envFrom as { configMapRef?: { name: string }; secretRef?: { name: string } }[]) {
      const o = from.configMapRef
        ? byName('ConfigMap', from.configMapRef.name)
        : byName('Secret', from.secretRef!.name);
      expect(o, JSON.stringify(from)).toBeDefined();
      for (const [k, v] of Object.entries(o!.data)) env[k] = from.secretRef ? Buffer.from(v, 'base64').toString() : v;
    }
    for (const e of c.env as { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[]) {
      expect(e.valueFrom?.fieldRef?.fieldPath).toBe('status.podIP');
      env[e.name] = '10.244.1.7';
    }
    expect(Object.keys(env).filter((k) => !known.has(k))).toEqual([]);
    const keys = byName('Secret', 'keywarden-keys')!;
    expect(Object.keys(keys.data).sort()).toEqual([...SHARED_KEY_SETTINGS].sort());
    const config = loadConfig(env, '/app');
    expect(config.workers).toBe(2);
    expect(config.redisUrl).toMatch(/^redis:\/\//);
    expect(config.databaseUrl).toMatch(/^postgresql:\/\//);
    expect(config.clusterAdvertiseHost).toBe('10.244.1.7');
    expect(config.responseSigningKey).toBe(/RESPONSE_SIGNING_KEY=(.*)/.exec(keysEnv)![1]);
  });
});
