// A tiny path router under /dashboard/ (the server answers index.html for every page path):
//   /dashboard/                      applications
//   /dashboard/apps/:id[/:tab]       one application, tab by docs/spec.md "Dashboard roles" rule 2
//   /dashboard/overview              charts across the caller's applications (view_stats)
//   /dashboard/team                  team members
//   /dashboard/account               own password and webhook
//   /dashboard/account/security      second factor, sessions, sign-ins, API tokens
import { useEffect, useRef, useSyncExternalStore, type AnchorHTMLAttributes } from 'react';

export const BASE = '/dashboard';

export type Route =
  | { name: 'apps' }
  | { name: 'app'; appId: string; tab: string | undefined }
  | { name: 'overview' }
  | { name: 'team' }
  | { name: 'account' }
  | { name: 'security' }
  | { name: 'not_found'; path: string };

export function parseRoute(pathname: string): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = rest
    .split('/')
    .filter(Boolean)
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  if (parts.length === 0) return { name: 'apps' };
  if (parts[0] === 'apps' && parts[1] && parts.length <= 3) return { name: 'app', appId: parts[1], tab: parts[2] };
  if (parts[0] === 'overview' && parts.length === 1) return { name: 'overview' };
  if (parts[0] === 'team' && parts.length === 1) return { name: 'team' };
  if (parts[0] === 'account' && parts.length === 1) return { name: 'account' };
  if (parts[0] === 'account' && parts[1] === 'security' && parts.length === 2) return { name: 'security' };
  return { name: 'not_found', path: rest };
}

export const paths = {
  apps: () => `${BASE}/`,
  app: (appId: string, tab?: string) => `${BASE}/apps/${encodeURIComponent(appId)}${tab ? `/${tab}` : ''}`,
  overview: () => `${BASE}/overview`,
  team: () => `${BASE}/team`,
  account: () => `${BASE}/account`,
  security: () => `${BASE}/account/security`,
};

const listeners = new Set<() => void>();

/** A view with unsaved work: asked before the user leaves it; `proceed` goes on to the destination. */
type Guard = (proceed: () => void) => void;
const guards = new Set<Guard>();
let shownPath = typeof location !== 'undefined' ? location.pathname + location.search : '/';

function go(to: string, replace: boolean): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  shownPath = to;
  listeners.forEach((l) => l());
  if (!replace) window.scrollTo(0, 0);
}

/**
 * Goes to `to`. A view's guard may hold a user's navigation (a link, the picker, Back) to ask
 * first; a replacing navigation is the page's own redirect (after a deletion, to a permitted tab)
 * and is never held.
 */
export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search) return;
  const guard = replace ? undefined : [...guards][0];
  if (guard) guard(() => go(to, false));
  else go(to, replace);
}

if (typeof window !== 'undefined') {
  window.addEventListener('popstate', () => {
    const to = location.pathname + location.search;
    const guard = [...guards][0];
    if (guard && to !== shownPath) {
      // Back or Forward already changed the address: put it back while the user decides.
      history.pushState(null, '', shownPath);
      guard(() => go(to, false));
      return;
    }
    shownPath = to;
    listeners.forEach((l) => l());
  });
}

/**
 * While `active`, leaving the page is held and `ask(proceed)` called instead (a dialog calls
 * `proceed` to leave); closing or reloading the tab gets the browser's own question.
 */
export function useNavigationGuard(active: boolean, ask: (proceed: () => void) => void): void {
  const askRef = useRef(ask);
  askRef.current = ask;
  useEffect(() => {
    if (!active) return;
    const guard: Guard = (proceed) => askRef.current(proceed);
    const unload = (e: BeforeUnloadEvent) => e.preventDefault();
    guards.add(guard);
    window.addEventListener('beforeunload', unload);
    return () => {
      guards.delete(guard);
      window.removeEventListener('beforeunload', unload);
    };
  }, [active]);
}

export function useRoute(): Route {
  const pathname = useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => location.pathname,
  );
  return parseRoute(pathname);
}

/** A real link (middle-click, copy address) that navigates in place on a plain click. */
export function Link({ to, onClick, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { to: string }) {
  return (
    <a
      href={to}
      onClick={(e) => {
        onClick?.(e);
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(to);
      }}
      {...rest}
    />
  );
}
