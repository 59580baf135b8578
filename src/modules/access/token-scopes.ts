// What an API token may reach (docs/protocol.md 13.1): every dashboard route needs one scope, read for GET
// and write otherwise, by the resource its path names; account routes (/api/auth, /api/tokens,
// /api/account) and anything unknown need a scope no token has. The map reads paths, so it serves a
// route's pattern (`/api/apps/:id/licenses`, the property test walks the router's table with it) and
// a request's concrete path alike; unprefixed paths (docs/protocol.md 1) are read with their /api prefix.
import { AppError } from '../../errors.js';
import type { Principal } from './principal.js';

export const TOKEN_SCOPES = [
  'apps:read',
  'apps:write',
  'licenses:read',
  'licenses:write',
  'users:read',
  'users:write',
  'logs:read',
  'team:read',
  'team:write',
  'releases:read',
  'releases:write',
] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

type Resource = 'apps' | 'licenses' | 'users' | 'logs' | 'team' | 'releases';

/** First match wins: a path under an app names the narrower resource before the app itself. */
const RESOURCES: readonly [RegExp, Resource | null][] = [
  [/^\/api\/(auth|tokens|account)(\/|$)/, null],
  [/^\/api\/team(\/|$)/, 'team'],
  [/^\/api\/(audit|ws)(\/|$)/, 'logs'],
  [/^\/api\/apps\/[^/]+\/(logs|events)(\/|$)/, 'logs'],
  [/^\/api\/(apps\/[^/]+\/)?licenses(\/|$)/, 'licenses'],
  // Bulk jobs act on keys (docs/api.md "Bulk jobs").
  [/^\/api\/(apps\/[^/]+\/)?jobs(\/|$)/, 'licenses'],
  // Air-gapped activation requests are answered with a key's file (docs/protocol.md 16.7: licenses:*).
  [/^\/api\/apps\/[^/]+\/offline-activations(\/|$)/, 'licenses'],
  [/^\/api\/(apps\/[^/]+\/)?users(\/|$)/, 'users'],
  [/^\/api\/(apps\/[^/]+\/)?releases(\/|$)/, 'releases'],
  [/^\/api\/(apps|bans|products|overview)(\/|$)/, 'apps'],
];

/** The scope a token needs for `method path`; null: no token may call it. */
export function routeScope(method: string, path: string): TokenScope | null {
  const p = path.startsWith('/api/') ? path : `/api${path}`;
  const read = method.toLowerCase() === 'get';
  for (const [re, resource] of RESOURCES) {
    if (!re.test(p)) continue;
    if (resource === null) return null;
    if (resource === 'logs') return read ? 'logs:read' : null; // logs and streams are read-only
    return `${resource}:${read ? 'read' : 'write'}`;
  }
  return null;
}

const APP_PATH = /^(?:\/api)?\/apps\/([^/]+)(?:\/|$)/;

/**
 * Whether a token principal may call `method path`: the route's scope must be granted and an
 * application named in the path must be among the token's app_ids, and a token with app_ids creates
 * no application. Sign-in sessions pass.
 */
export function assertTokenAllows(p: Principal, method: string, path: string): void {
  if (!p.token) return;
  const scope = routeScope(method, path);
  if (scope === null || !p.token.scopes.includes(scope)) throw new AppError('token_scope');
  // docs/protocol.md 11.37: a token limited to some applications cannot make another one.
  if (p.token.appIds && method.toLowerCase() === 'post' && /^(?:\/api)?\/apps\/?$/.test(path))
    throw new AppError('token_scope');
  const appId = APP_PATH.exec(path)?.[1];
  if (appId !== undefined) assertTokenApp(p, appId);
}

/** A token limited to app_ids reaches no other application (403, whether or not it exists). */
export function assertTokenApp(p: Principal, appId: string): void {
  if (p.token?.appIds && !p.token.appIds.includes(appId.toLowerCase())) throw new AppError('token_scope');
}
