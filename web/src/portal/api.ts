// The portal's calls (docs/protocol.md 14). The kw_portal cookie authenticates (HttpOnly: this page never
// sees the token); the browser sends the page's Origin, which the server checks on writes.

export interface Device {
  hwid: string;
  first_seen: string | null;
  last_seen: string | null;
}

export interface Me {
  /** offline_days: how long an offline license file is valid; 0 = the application issues none. */
  app: { name: string; offline_days: number };
  license: {
    key_preview: string;
    computed_status: 'active' | 'banned' | 'unactivated' | 'expired';
    level: number;
    expires_at: string | null;
    entitlements: string[];
    devices: Device[];
    max_devices: number;
    live_sessions: number;
  };
  user: { username: string; created_at: string | null; last_login: string | null } | null;
  next_reset_at: string | null;
}

export interface BuyerOrder {
  product: string;
  keys: string[];
  created_at: string;
}

export class PortalError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly retryAfter: number | null,
  ) {
    super(message);
  }
}

/** What a customer reads when a call fails. */
export function failureText(e: unknown): string {
  return e instanceof PortalError ? e.message : 'The service could not be reached. Try again.';
}

function detailText(detail: unknown): string {
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) return detail.map((d: { msg?: string }) => d.msg ?? '').join(' ');
  return 'Something went wrong.';
}

export async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const data: unknown = await res.json().catch(() => ({}));
  if (!res.ok) {
    const retry = res.headers.get('Retry-After');
    throw new PortalError(res.status, detailText((data as { detail?: unknown }).detail), retry ? Number(retry) : null);
  }
  return data as T;
}
