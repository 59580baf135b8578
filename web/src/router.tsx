// A tiny path router under /dashboard/ (the server answers index.html for every page path):
//   /dashboard/                      applications
//   /dashboard/apps/:id[/:tab]       one application, tab by SPEC Dashboard rule 2
//   /dashboard/team                  team members
//   /dashboard/account               own password and webhook
import { useSyncExternalStore, type AnchorHTMLAttributes } from 'react';

export const BASE = '/dashboard';

export type Route =
  | { name: 'apps' }
  | { name: 'app'; appId: string; tab: string | undefined }
  | { name: 'team' }
  | { name: 'account' }
  | { name: 'not_found'; path: string };

export function parseRoute(pathname: string): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = rest.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  if (parts.length === 0) return { name: 'apps' };
  if (parts[0] === 'apps' && parts[1] && parts.length <= 3) return { name: 'app', appId: parts[1], tab: parts[2] };
  if (parts[0] === 'team' && parts.length === 1) return { name: 'team' };
  if (parts[0] === 'account' && parts.length === 1) return { name: 'account' };
  return { name: 'not_found', path: rest };
}

export const paths = {
  apps: () => `${BASE}/`,
  app: (appId: string, tab?: string) => `${BASE}/apps/${encodeURIComponent(appId)}${tab ? `/${tab}` : ''}`,
  team: () => `${BASE}/team`,
  account: () => `${BASE}/account`,
};

const listeners = new Set<() => void>();
if (typeof window !== 'undefined') window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  listeners.forEach((l) => l());
  if (!replace) window.scrollTo(0, 0);
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
