// A small kustomize renderer for the features deploy/kubernetes uses (kubectl apply -k renders the
// same): resources (files and directories), namespace, images, strategic-merge patches, and
// secretGenerator from env files without name hashes. Any other field is an error here, so a
// manifest that starts using one cannot pass the tests unrendered.
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

const SUPPORTED = new Set([
  'apiVersion',
  'kind',
  'namespace',
  'resources',
  'images',
  'patches',
  'secretGenerator',
  'generatorOptions',
]);

interface Kustomization {
  namespace?: string;
  resources?: string[];
  images?: { name: string; newName?: string; newTag?: string }[];
  patches?: { path: string }[];
  secretGenerator?: { name: string; envs: string[] }[];
  generatorOptions?: { disableNameSuffixHash?: boolean };
}

function docs(file: string): K8sObject[] {
  return parseAllDocuments(fs.readFileSync(file, 'utf8')).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`);
    return d.toJS() as K8sObject;
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Strategic merge as far as these manifests need it: maps merge, lists of named items merge by name. */
export function strategicMerge(base: unknown, patch: unknown): unknown {
  if (isObject(base) && isObject(patch)) {
    const out: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else out[k] = strategicMerge(base[k], v);
    }
    return out;
  }
  const named = (l: unknown): l is { name: string }[] =>
    Array.isArray(l) && l.every((x) => isObject(x) && typeof x.name === 'string');
  if (named(base) && named(patch)) {
    const out = base.map((b) => {
      const p = patch.find((x) => x.name === b.name);
      return p ? strategicMerge(b, p) : b;
    });
    for (const p of patch) if (!base.some((b) => b.name === p.name)) out.push(p);
    return out;
  }
  return patch;
}

function envFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    if (/^\s*(#|$)/.test(line)) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
    if (!m) throw new Error(`not an env line: ${line}`);
    out[m[1]!] = m[2]!;
  }
  return out;
}

/**
 * Renders the kustomization in `dir`. `files` supplies files the repository does not hold (the
 * operator's keys.env and backends.env), by path relative to `dir`.
 */
export function render(dir: string, files: Record<string, string> = {}): K8sObject[] {
  const k = docs(path.join(dir, 'kustomization.yaml'))[0] as unknown as Kustomization & Record<string, unknown>;
  for (const field of Object.keys(k)) if (!SUPPORTED.has(field)) throw new Error(`${dir}: unsupported field ${field}`);
  let objects: K8sObject[] = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    objects.push(...(fs.statSync(p).isDirectory() ? render(p, {}) : docs(p)));
  }
  if (k.secretGenerator) {
    if (k.generatorOptions?.disableNameSuffixHash !== true)
      throw new Error(`${dir}: only secretGenerator with disableNameSuffixHash is rendered here`);
    for (const g of k.secretGenerator) {
      const data: Record<string, string> = {};
      for (const e of g.envs) {
        const text = files[e] ?? fs.readFileSync(path.join(dir, e), 'utf8');
        for (const [key, value] of Object.entries(envFile(text))) data[key] = Buffer.from(value).toString('base64');
      }
      objects.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: g.name }, type: 'Opaque', data });
    }
  }
  for (const p of k.patches ?? []) {
    for (const patch of docs(path.join(dir, p.path))) {
      const i = objects.findIndex((o) => o.kind === patch.kind && o.metadata.name === patch.metadata.name);
      if (i < 0) throw new Error(`${p.path}: no ${patch.kind} ${patch.metadata.name} to patch`);
      objects[i] = strategicMerge(objects[i], patch) as K8sObject;
    }
  }
  for (const img of k.images ?? []) {
    for (const o of objects) {
      const pod = ((o.spec as { template?: { spec?: Record<string, unknown> } } | undefined)?.template?.spec ?? {}) as {
        containers?: { image: string }[];
        initContainers?: { image: string }[];
      };
      for (const c of [...(pod.containers ?? []), ...(pod.initContainers ?? [])]) {
        const name = c.image.replace(/[@:][^/]*$/, '');
        if (name === img.name) c.image = `${img.newName ?? name}:${img.newTag ?? 'latest'}`;
      }
    }
  }
  if (k.namespace) objects = objects.map((o) => ({ ...o, metadata: { ...o.metadata, namespace: k.namespace! } }));
  return objects;
}
