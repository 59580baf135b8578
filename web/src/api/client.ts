// The typed API client: openapi-fetch over the paths generated from /api/openapi.json
// (schema.d.ts), so paths, path parameters, query strings and request bodies are checked by tsc.
// The browser authenticates with the HttpOnly kw_session cookie (same origin); the server checks
// the Origin header the browser adds to every write (CSRF defence, see docs/dashboard.md).
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.js';
import { ApiError, apiError } from './errors.js';

export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });

type SignedOutListener = () => void;
const signedOut = new Set<SignedOutListener>();

/** Called when any call answers 401: the session ended (signed out elsewhere, revoked, expired). */
export function onSignedOut(fn: SignedOutListener): () => void {
  signedOut.add(fn);
  return () => signedOut.delete(fn);
}

const sessionWatch: Middleware = {
  onResponse({ request, response }) {
    if (response.status === 401 && !new URL(request.url).pathname.endsWith('/api/auth/login'))
      for (const fn of signedOut) fn();
    return undefined;
  },
};
api.use(sessionWatch);

interface FetchResult {
  data?: unknown;
  error?: unknown;
  response: Response;
}

/**
 * Unwraps an openapi-fetch call: the body on success, else throws an ApiError with the server's
 * detail. A network failure (no answer at all) becomes an ApiError with status 0.
 */
export async function unwrap<T>(call: Promise<FetchResult>): Promise<T> {
  let r: FetchResult;
  try {
    r = await call;
  } catch (err) {
    throw err instanceof ApiError
      ? err
      : new ApiError(0, 'The server could not be reached. Check your connection and try again.');
  }
  if (r.response.ok) return r.data as T;
  throw apiError(r.response.status, r.response.statusText, r.error, r.response.headers.get('retry-after'));
}
