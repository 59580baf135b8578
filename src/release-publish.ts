// `keywarden release publish`: a CI job's one line (docs/releases.md "Publishing from CI"). It speaks
// to a deployment's dashboard API with an API token (scope releases:write): creates the release,
// uploads each file as a streamed PUT (never read whole into memory), then publishes it.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';

export const RELEASE_USAGE = `usage:
  keywarden release publish --app ID --version V [--channel C] [--notes TEXT] [--entitlement CODE ...]
                            [--url URL] FILE[@platform/arch] ...
  The deployment's URL comes from --url or KEYWARDEN_URL, the API token (releases:write) from KW_TOKEN.`;

class PublishError extends Error {}

/** The largest Content-Length the server reads (9 digits; docs/security.md "Declared lengths"). */
const MAX_DECLARED = 999_999_999;

interface Target {
  file: string;
  platform?: string;
  arch?: string;
}

/** `dist/app.exe@windows/x64` -> the file and its platform and arch (absent: any). */
function targetOf(spec: string): Target {
  const at = spec.lastIndexOf('@');
  const m = at > 0 ? /^([a-z0-9_]{1,32})\/([a-z0-9_]{1,32})$/.exec(spec.slice(at + 1)) : null;
  return m ? { file: spec.slice(0, at), platform: m[1]!, arch: m[2]! } : { file: spec };
}

async function call(url: string, token: string, method: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (!res.ok) throw new PublishError(`${method} ${new URL(url).pathname}: ${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

async function upload(base: string, token: string, releaseId: string, t: Target, log: (s: string) => void) {
  const size = (await stat(t.file)).size;
  const name = path.basename(t.file);
  const query = new URLSearchParams({
    ...(t.platform ? { platform: t.platform } : {}),
    ...(t.arch ? { arch: t.arch } : {}),
  });
  const url = `${base}/api/releases/${releaseId}/artifacts/${encodeURIComponent(name)}?${query}`;
  const res = await fetch(url, {
    method: 'PUT',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/octet-stream',
      // uWS refuses a Content-Length of 10 digits: past that, the body goes chunked.
      ...(size <= MAX_DECLARED ? { 'content-length': String(size) } : {}),
    },
    body: Readable.toWeb(createReadStream(t.file)) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  const text = await res.text();
  if (res.status !== 201) throw new PublishError(`upload of ${name}: ${res.status} ${text}`);
  const a = JSON.parse(text) as { sha256: string; platform: string; arch: string };
  log(`uploaded ${name} (${size} bytes, ${a.platform}/${a.arch}, sha256 ${a.sha256})`);
}

/** Runs `release <sub> ...`; returns the exit code. */
export async function releaseCommand(
  args: string[],
  env: NodeJS.ProcessEnv,
  log: (s: string) => void = (s) => console.log(s),
): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'publish') {
    console.error(RELEASE_USAGE);
    return 2;
  }
  const { values: o, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      app: { type: 'string' },
      version: { type: 'string' },
      channel: { type: 'string' },
      notes: { type: 'string' },
      entitlement: { type: 'string', multiple: true },
      url: { type: 'string' },
    },
  });
  const base = (o.url ?? env.KEYWARDEN_URL ?? '').replace(/\/+$/, '');
  const token = env.KW_TOKEN ?? '';
  if (!o.app || !o.version || positionals.length === 0 || !base || !token) {
    console.error(RELEASE_USAGE);
    return 2;
  }
  try {
    const targets = positionals.map(targetOf);
    for (const t of targets) await stat(t.file); // every file is there before anything is created
    const created = await call(`${base}/api/apps/${o.app}/releases`, token, 'POST', {
      version: o.version,
      ...(o.channel ? { channel: o.channel } : {}),
      ...(o.notes ? { notes: o.notes } : {}),
      ...(o.entitlement ? { entitlements: o.entitlement } : {}),
    });
    const id = created.id as string;
    log(`created release ${o.version} (${id})`);
    for (const t of targets) await upload(base, token, id, t, log);
    await call(`${base}/api/releases/${id}/publish`, token, 'POST');
    log(`published ${o.version} on ${(created.channel as string) ?? 'stable'}`);
    return 0;
  } catch (err) {
    console.error(`keywarden release publish: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}
