// The page frame: sign-in when there is no session, else the header (application picker, Team,
// Account, sign-out) and the current view.
import { useEffect, useMemo, useRef, useState } from 'react';
import { useIsFetching, useIsMutating, useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { ApiError } from './api/errors.js';
import { onSignedOut } from './api/client.js';
import { apps as appsApi, auth } from './api/endpoints.js';
import { ErrorState, Loading, useDelayed } from './components/ui.js';
import { isManager, showsStats } from './lib/permissions.js';
import { useTitle } from './hooks/useTitle.js';
import { Link, navigate, paths, useRoute } from './router.js';
import { SessionContext, callerOf, type Session } from './session.js';
import { LoginView } from './views/LoginView.js';
import { AppsView } from './views/AppsView.js';
import { AppView } from './views/AppView.js';
import { TeamView } from './views/TeamView.js';
import { AccountView } from './views/AccountView.js';
import { OverviewView } from './views/Charts.js';
import { SecurityView, TwoFactorRequired } from './views/SecurityView.js';

/** Drops every cached answer but the session's own query (its observer stays subscribed). */
function forgetAccount(qc: QueryClient): void {
  qc.removeQueries({ predicate: (q) => q.queryKey[0] !== 'me' });
}

/** Why a signed-in page is back at the sign-in form. */
export const SESSION_ENDED = 'Your session was ended by an administrator, or it expired. Sign in again to continue.';
export const SIGNED_OUT_ELSEWHERE = 'You signed out in another tab.';

/** Tabs of this browser tell each other about a sign-out, so the others can say why they ended. */
const sessionChannel = typeof BroadcastChannel === 'undefined' ? null : new BroadcastChannel('keywarden-session');

function ProgressBar() {
  const busy = useIsFetching() + useIsMutating() > 0;
  const late = useDelayed(busy);
  return (
    <div className={`top-progress${late ? ' on' : ''}`} role="progressbar" aria-hidden={!late} aria-label="Working" />
  );
}

export function App() {
  const qc = useQueryClient();
  const me = useQuery({
    queryKey: ['me'],
    queryFn: async () => {
      try {
        return await auth.me();
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return null; // not signed in
        throw err;
      }
    },
    staleTime: 60_000,
  });

  // A 401 while signed in (on any call, or on /me after the live stream closed with 1008) means
  // the session ended elsewhere: the sign-in form says why instead of appearing unexplained.
  const [ended, setEnded] = useState<string | null>(null);
  const signedIn = useRef(false);
  signedIn.current = !!me.data?.account;
  const elsewhere = useRef(false);
  useEffect(
    () =>
      onSignedOut(() => {
        if (signedIn.current) setEnded(elsewhere.current ? SIGNED_OUT_ELSEWHERE : SESSION_ENDED);
        forgetAccount(qc);
        qc.setQueryData(['me'], null);
      }),
    [qc],
  );
  useEffect(() => {
    if (!sessionChannel) return;
    const heard = (e: MessageEvent) => {
      if (e.data !== 'signed-out') return;
      elsewhere.current = true;
      void qc.invalidateQueries({ queryKey: ['me'] });
    };
    sessionChannel.addEventListener('message', heard);
    return () => sessionChannel.removeEventListener('message', heard);
  }, [qc]);

  const session = useMemo<Session | null>(() => {
    const account = me.data?.account;
    if (!account) return null;
    return {
      account,
      caller: callerOf(account),
      signOut: async () => {
        try {
          await auth.logout();
          sessionChannel?.postMessage('signed-out');
        } finally {
          forgetAccount(qc);
          qc.setQueryData(['me'], null);
          navigate(paths.apps(), true);
        }
      },
      refresh: () => void qc.invalidateQueries({ queryKey: ['me'] }),
    };
  }, [me.data, qc]);

  if (me.isPending)
    return (
      <main className="center">
        <Loading label="Loading Keywarden" />
      </main>
    );
  if (me.isError)
    return (
      <main className="center">
        <ErrorState error={me.error} retry={() => void me.refetch()} />
      </main>
    );
  if (!session) {
    return (
      <LoginView
        notice={ended}
        onSignedIn={(account) => {
          setEnded(null);
          elsewhere.current = false;
          forgetAccount(qc);
          qc.setQueryData(['me'], { account });
          void qc.invalidateQueries({ queryKey: ['me'] }); // adds what only /me carries (webhook_secret)
        }}
      />
    );
  }
  return (
    <SessionContext.Provider value={session}>
      <ProgressBar />
      <Shell />
    </SessionContext.Provider>
  );
}

function Shell() {
  const route = useRoute();
  return (
    <SessionContext.Consumer>
      {(s) =>
        s && (
          <>
            <a className="skip-link" href="#main">
              Skip to content
            </a>
            <header className="topbar">
              <Link to={paths.apps()} className="brand" aria-label="Keywarden: applications">
                <img src="/dashboard/favicon.svg" alt="" width="22" height="22" /> Keywarden
              </Link>
              {!s.account.two_factor_required && <AppPicker current={route.name === 'app' ? route.appId : undefined} />}
              <nav className="topnav" aria-label="Main">
                <Link to={paths.apps()} aria-current={route.name === 'apps' ? 'page' : undefined}>
                  Apps
                </Link>
                {showsStats(s.caller) && (
                  <Link to={paths.overview()} aria-current={route.name === 'overview' ? 'page' : undefined}>
                    Overview
                  </Link>
                )}
                {isManager(s.caller) && (
                  <Link to={paths.team()} aria-current={route.name === 'team' ? 'page' : undefined}>
                    Team
                  </Link>
                )}
                <Link
                  to={paths.account()}
                  aria-current={route.name === 'account' || route.name === 'security' ? 'page' : undefined}
                >
                  Account
                </Link>
              </nav>
              <div className="whoami">
                <span title={`Signed in as ${s.account.username} (${s.account.role})`}>
                  {s.account.username} <span className="role">{s.account.role}</span>
                </span>
                <button type="button" className="btn btn-ghost" onClick={() => void s.signOut()}>
                  Sign out
                </button>
              </div>
            </header>
            <main id="main" className="content" tabIndex={-1}>
              {s.account.two_factor_required ? (
                // The owner requires a second factor: every other call would answer 403 until it is set up.
                <TwoFactorRequired />
              ) : (
                <>
                  {route.name === 'apps' && <AppsView />}
                  {route.name === 'app' && <AppView key={route.appId} appId={route.appId} tab={route.tab} />}
                  {route.name === 'overview' && <OverviewView />}
                  {route.name === 'team' && <TeamView />}
                  {route.name === 'account' && <AccountView />}
                  {route.name === 'security' && <SecurityView />}
                  {route.name === 'not_found' && <NotFound path={route.path} />}
                </>
              )}
            </main>
            <footer className="footer">
              Keywarden · times in your time zone ({Intl.DateTimeFormat().resolvedOptions().timeZone}); hover a time for
              UTC
            </footer>
          </>
        )
      }
    </SessionContext.Consumer>
  );
}

function NotFound({ path }: { path: string }) {
  useTitle('Page not found');
  return (
    <div className="alert">
      No page at {path}. <Link to={paths.apps()}>Go to your applications</Link>.
    </div>
  );
}

function AppPicker({ current }: { current: string | undefined }) {
  const list = useQuery({ queryKey: ['apps'], queryFn: appsApi.list });
  if (!list.data || list.data.length === 0) return null;
  return (
    <label className="picker">
      <span className="sr-only">Application</span>
      <select
        value={current ?? ''}
        onChange={(e) => navigate(e.target.value ? paths.app(e.target.value) : paths.apps())}
        aria-label="Application"
      >
        <option value="">All applications</option>
        {list.data.map((a) => (
          <option key={a.id} value={a.id}>
            {a.name}
          </option>
        ))}
      </select>
    </label>
  );
}
