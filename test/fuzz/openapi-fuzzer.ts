// A request fuzzer generated from the server's own /api/openapi.json: for every operation
// it draws path parameters, query strings and bodies from the JSON Schema (valid values, values at
// and past every limit, wrong types, U+0000, unicode, extra fields) plus raw hostile bodies, with
// fast-check's seeded generator, and checks every answer: never a 5xx, never slower than the hang
// limit, every /api/client/ response signed. Used by test/e2e/fuzz.test.ts (a few thousand
// requests in `npm test`) and by scripts/fuzz.ts (`npm run fuzz -- --requests 100000`).
import fc from 'fast-check';
import { ClientApi } from '../helpers/client.js';

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  const?: unknown;
  enum?: unknown[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  pattern?: string;
  additionalProperties?: boolean | Schema;
};

interface Operation {
  method: string;
  path: string;
  /** A stream (SSE): only requests that cannot open it are drawn, so each gets an answer. */
  stream?: boolean;
  query: { name: string; schema: Schema }[];
  body?: Schema;
}

const CHUNK = 500;

export interface FuzzContext {
  base: string;
  /** A valid dashboard bearer token (the owner's). */
  token: () => string;
  /** Real ids and secrets worth reusing, so requests reach past the 404s. */
  appId: string;
  apiKey: string;
  session: () => string;
}

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface FuzzFailure {
  request: FuzzRequest;
  reason: string;
}

/** Operations of the document, minus those that would end the fuzzer's own access. */
export function operationsOf(doc: {
  paths: Record<
    string,
    Record<
      string,
      {
        parameters?: { name: string; in: string; schema: Schema }[];
        requestBody?: { content: Record<string, { schema: Schema }> };
      }
    >
  >;
}): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      if (
        path.endsWith('/auth/logout') ||
        path.endsWith('/auth/password') ||
        path === '/api/ws' ||
        path === '/api/client/ws'
      )
        continue;
      ops.push({
        method: method.toUpperCase(),
        path,
        stream: path.endsWith('/events'),
        query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema })),
        ...(op.requestBody ? { body: op.requestBody.content['application/json']!.schema } : {}),
      });
    }
  }
  return ops;
}

const nasty = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\uFFFF',
  '\uD800',
  '😀'.repeat(10),
  '../../etc/passwd',
  '%00',
  '%E0%A4%A',
  "'; drop table accounts; --",
  '<script>alert(1)</script>',
  'null',
  '-1',
  '1e309',
  '9'.repeat(40),
  'x'.repeat(5000),
  '\n\r\t',
  'TT' + 'f'.repeat(32),
);
const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.string(),
  nasty,
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
);

function stringFor(s: Schema): fc.Arbitrary<string> {
  const min = s.minLength ?? 0;
  const max = Math.min(s.maxLength ?? 64, 5000);
  const fitting = s.pattern
    ? fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length <= max)
    : fc.string({ minLength: min, maxLength: Math.min(max, 80), unit: 'grapheme' });
  return fc.oneof(
    { weight: 6, arbitrary: fitting },
    { weight: 1, arbitrary: fc.constant('x'.repeat(max)) },
    { weight: 1, arbitrary: fc.constant('é'.repeat(max + 1)) },
    { weight: 2, arbitrary: nasty },
    { weight: 1, arbitrary: fitting.map((v) => `${v}\u0000`) },
  );
}

function numberFor(s: Schema): fc.Arbitrary<unknown> {
  const lo = s.minimum ?? -2_147_483_648;
  const hi = s.maximum ?? 2_147_483_647;
  return fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: Math.max(lo, -(2 ** 31)), max: Math.min(hi, 2 ** 31 - 1) }) },
    { weight: 2, arbitrary: fc.constantFrom(lo - 1, hi + 1, 0, -1, 2 ** 53, -(2 ** 53), 1.5, 1e308) },
    { weight: 1, arbitrary: fc.constantFrom('1', null, true, [1]) },
  );
}

/** Values for a schema: mostly valid, often at or past a limit, sometimes of another type. */
export function valueFor(s: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!s || depth > 4) return anyJson;
  if (s.const !== undefined)
    return fc.oneof({ weight: 8, arbitrary: fc.constant(s.const) }, { weight: 1, arbitrary: anyJson });
  if (s.enum) return fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...s.enum) }, { weight: 1, arbitrary: anyJson });
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return fc.oneof(...alts.map((a) => valueFor(a, depth + 1)));
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  const wrong = anyJson;
  let right: fc.Arbitrary<unknown>;
  switch (type) {
    case 'string':
      right = stringFor(s);
      break;
    case 'integer':
    case 'number':
      right = numberFor(s);
      break;
    case 'boolean':
      right = fc.boolean();
      break;
    case 'null':
      right = fc.constant(null);
      break;
    case 'array':
      right = fc.array(valueFor(s.items, depth + 1), { maxLength: Math.min(s.maxItems ?? 5, 5) });
      break;
    case 'object':
      right = objectFor(s, depth);
      break;
    default:
      right = anyJson;
  }
  return fc.oneof({ weight: 9, arbitrary: right }, { weight: 1, arbitrary: wrong });
}

function objectFor(s: Schema, depth: number): fc.Arbitrary<unknown> {
  const props = s.properties ?? {};
  const required = new Set(s.required ?? []);
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [k, v] of Object.entries(props)) record[k] = valueFor(v, depth + 1);
  const base = fc.record(record, { requiredKeys: [...required].filter((k) => k in props) });
  return fc
    .tuple(base, fc.option(fc.dictionary(fc.string({ maxLength: 8 }), anyJson, { maxKeys: 2 }), { freq: 5 }))
    .map(([o, extra]) => (extra ? { ...extra, ...(o as object) } : o));
}

/** Percent-encodes every UTF-8 byte (lone surrogates become U+FFFD; encodeURIComponent would throw). */
function percent(v: string): string {
  return [...Buffer.from(v, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
}

function pathParam(ctx: FuzzContext): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.constant(ctx.appId) },
    { weight: 2, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: nasty.map(percent) },
    { weight: 1, arbitrary: fc.constantFrom('python', 'csharp', 'cpp', 'typescript', 'cobol', '%E0%A4%A', '..') },
  );
}

/** Cookie and Authorization values that are not valid percent-encoding or base64, of any length. */
const badCredential = fc.constantFrom(
  '%',
  '%E0',
  '%E0%A4%A',
  '%zz%',
  '%%%%',
  '%'.repeat(3000),
  '\u00ff\u00fe',
  'x'.repeat(9000),
  '=',
  '"%"',
);

/** Extra headers: malformed encodings, huge values, many of them. */
const extraHeaders: fc.Arbitrary<Record<string, string>> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({}) },
  {
    weight: 2,
    arbitrary: fc.dictionary(
      fc.constantFrom(
        'x-forwarded-for',
        'origin',
        'referer',
        'x-timestamp',
        'x-signature',
        'x-nonce',
        'x-session',
        'x-client-version',
        'accept-encoding',
        'x-custom',
      ),
      badCredential.map((v) => v.replace(/[^\x20-\x7e]/g, '?')),
      { maxKeys: 4 },
    ),
  },
  // Up to uWebSockets.js's parser limit of 50 headers in all, fetch's own included (past it the
  // connection is closed unanswered: a documented limit of the transport).
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 20, max: 34 })
      .map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-many-${i}`, 'v'.repeat(i * 5)]))),
  },
  { weight: 1, arbitrary: fc.constant({ 'x-huge': 'h'.repeat(12_000) }) },
);

/** Junk added to the query string: unknown keys, repeats, and raw malformed %-escapes. */
const junkQuery = fc.oneof(
  { weight: 6, arbitrary: fc.constant('') },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '%',
      '%zz',
      'a=%E0%A4%A',
      'limit=1&limit=x',
      'cursor=%00',
      '&&&=&',
      'before=-1',
      'q=' + '%41'.repeat(400),
      'x'.repeat(4000),
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.tuple(fc.string({ maxLength: 6 }), fc.string({ maxLength: 12 })), { maxLength: 5 })
      .map((kv) => kv.map(([k, v]) => `${percent(k)}=${percent(v)}`).join('&')),
  },
);

/** The arbitrary of one request to `op`, with the real session and api_key mixed into client calls. */
export function requestFor(op: Operation, ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const params = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  const client = op.path.startsWith('/api/client/');
  const rawBodies = fc.constantFrom(
    '{',
    '[]',
    'null',
    '"x"',
    '1',
    '{"a":' + '['.repeat(5000),
    `{"a":${'['.repeat(7000)}${']'.repeat(7000)}}`,
    '{"session":' + JSON.stringify('x'.repeat(20000)) + '}',
    '\u0000',
  );
  const body = op.body
    ? fc.oneof(
        { weight: 8, arbitrary: valueFor(op.body).map((v) => JSON.stringify(client ? withClientIdentity(v, ctx) : v)) },
        { weight: 1, arbitrary: rawBodies },
      )
    : fc.option(rawBodies, { freq: 8 }).map((b) => b ?? undefined);
  const query = fc.record(Object.fromEntries(op.query.map((q) => [q.name, valueFor(q.schema)])), { requiredKeys: [] });
  return fc
    .tuple(
      fc.array(pathParam(ctx), { minLength: params.length, maxLength: params.length }),
      query,
      body,
      op.stream
        ? fc.constantFrom('none', 'garbage', 'bad-cookie', 'bad-bearer')
        : fc.constantFrom('owner', 'owner', 'owner', 'owner-cookie', 'none', 'garbage', 'bad-cookie', 'bad-bearer'),
      fc.ipV4(),
      fc.oneof(
        { weight: 12, arbitrary: fc.constant(op.method) },
        { weight: 1, arbitrary: fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'POST') },
      ),
      badCredential,
      extraHeaders,
      junkQuery,
    )
    .map(([values, q, b, auth, ip, method, bad, extra, junk]) => {
      let path = op.path;
      params.forEach((p, i) => {
        path = path.replace(`{${p}}`, values[i]!);
      });
      const qs: string[] = [];
      for (const [k, v] of Object.entries(q as Record<string, unknown>))
        if (v !== undefined) qs.push(`${k}=${percent(typeof v === 'string' ? v : JSON.stringify(v))}`);
      if (junk) qs.push(junk);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'x-forwarded-for': ip,
        'x-nonce': `fuzz-${Math.random().toString(36).slice(2)}-0000`,
        ...extra,
      };
      if (auth === 'owner') headers.authorization = `Bearer ${ctx.token()}`;
      if (auth === 'owner-cookie')
        Object.assign(headers, { cookie: `a=b; kw_session=${ctx.token()}`, origin: ctx.base });
      if (auth === 'garbage') headers.authorization = 'Bearer \u00ff\u00fe' + 'x'.repeat(30);
      if (auth === 'bad-cookie') Object.assign(headers, { cookie: `kw_session=${bad}`, origin: ctx.base });
      if (auth === 'bad-bearer') headers.authorization = `Bearer ${bad}`;
      const qstr = qs.join('&');
      return {
        method,
        path: qstr ? `${path}?${qstr}` : path,
        headers,
        ...(b !== undefined && method !== 'GET' ? { body: b as string } : {}),
      };
    });
}

function withClientIdentity(v: unknown, ctx: FuzzContext): unknown {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return v;
  const o = v as Record<string, unknown>;
  const coin = (o.api_key === undefined ? 0 : 1) + (typeof o.session === 'string' ? o.session.length : 0);
  if (coin % 3 !== 0) return o;
  return {
    ...o,
    ...('api_key' in o ? { api_key: ctx.apiKey } : {}),
    ...('session' in o ? { session: ctx.session() } : {}),
  };
}

/** Sends one request and returns what is wrong with its answer, or null; counts statuses in `seen`. */
export async function check(
  req: FuzzRequest,
  ctx: FuzzContext,
  verifier: ClientApi,
  hangMs: number,
  seen: Map<number, number>,
): Promise<string | null> {
  const started = performance.now();
  let res: Response;
  let raw: Buffer;
  try {
    res = await fetch(ctx.base + req.path, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: AbortSignal.timeout(hangMs),
    });
    raw = Buffer.from(await res.arrayBuffer());
  } catch (err) {
    return `no answer within ${hangMs} ms (${(err as Error).name}: ${(err as Error).message})`;
  }
  const took = performance.now() - started;
  seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
  if (res.status >= 500) return `status ${res.status}: ${raw.toString('utf8').slice(0, 200)}`;
  if (took > hangMs) return `answered after ${Math.round(took)} ms`;
  const pathOnly = req.path.split('?')[0]!;
  if (pathOnly.startsWith('/api/client/')) {
    try {
      verifier.assertSigned(req.method, pathOnly, res, raw, req.headers['x-nonce'] ?? '');
    } catch (err) {
      return `client response not verifiable: ${(err as Error).message}`;
    }
  }
  return null;
}

/** Runs `count` generated requests, `concurrency` at a time; returns the failures (at most 20) and the statuses seen. */
export async function fuzz(
  ctx: FuzzContext,
  doc: Parameters<typeof operationsOf>[0],
  opts: { seed: number; count: number; concurrency: number; hangMs: number; onProgress?: (done: number) => void },
): Promise<{ failures: FuzzFailure[]; statuses: Map<number, number> }> {
  const statuses = new Map<number, number>();
  const ops = operationsOf(doc);
  const verifier = new ClientApi(ctx.base);
  await verifier.loadKeys();
  const arb = fc.oneof(...ops.map((op) => requestFor(op, ctx)));
  const failures: FuzzFailure[] = [];
  let done = 0;
  // Drawn in chunks (seed + chunk number): a long run never holds all its requests in memory.
  for (let chunk = 0; done < opts.count && failures.length < 20; chunk++) {
    const requests = fc.sample(arb, { seed: opts.seed + chunk, numRuns: Math.min(CHUNK, opts.count - done) });
    let next = 0;
    await Promise.all(
      Array.from({ length: opts.concurrency }, async () => {
        while (next < requests.length && failures.length < 20) {
          const request = requests[next++]!;
          const reason = await check(request, ctx, verifier, opts.hangMs, statuses);
          if (reason) failures.push({ request: { ...request, body: request.body?.slice(0, 300) }, reason });
          opts.onProgress?.(++done);
        }
      }),
    );
  }
  return { failures, statuses };
}
