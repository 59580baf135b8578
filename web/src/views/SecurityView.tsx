// Account > Security: the second factor, live sessions ("sign out everywhere"), recent sign-ins,
// API tokens, an owner's two-factor policy for its tree, and the account audit (who did what).
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { security as securityApi } from '../api/endpoints.js';
import { Badge, Button, EmptyState, ErrorState, Loading, Switch, Time } from '../components/ui.js';
import { useTitle } from '../hooks/useTitle.js';
import { useNotice } from '../notices.js';
import { Link, paths } from '../router.js';
import { useSession } from '../session.js';
import { TokensCard } from './TokensCard.js';
import { TwoFactorCard } from './TwoFactorCard.js';

/** The Account pages' own tabs. */
export function AccountNav({ current }: { current: 'profile' | 'security' }) {
  return (
    <nav className="tabs" aria-label="Account sections">
      <Link to={paths.account()} className="tab" aria-current={current === 'profile' ? 'page' : undefined}>
        Profile
      </Link>
      <Link to={paths.security()} className="tab" aria-current={current === 'security' ? 'page' : undefined}>
        Security
      </Link>
    </nav>
  );
}

function useSecurityState() {
  return useQuery({ queryKey: ['security'], queryFn: securityApi.state });
}

function SessionsCard() {
  const qc = useQueryClient();
  const notice = useNotice();
  const state = useSecurityState();
  const done = (text: string) => () => {
    notice('ok', text);
    void qc.invalidateQueries({ queryKey: ['security'] });
  };
  const everywhere = useMutation({
    mutationFn: securityApi.signOutEverywhere,
    onSuccess: (r) => done(r.revoked === 1 ? '1 other session signed out' : `${r.revoked} other sessions signed out`)(),
    onError: (err) => notice('error', err.message),
  });
  const end = useMutation({
    mutationFn: (id: string) => securityApi.endSession(id),
    onSuccess: done('Session signed out'),
    onError: (err) => notice('error', err.message),
  });
  const sessions = state.data?.sessions ?? [];
  return (
    <section className="card card-wide" aria-labelledby="sessions-title">
      <h2 id="sessions-title">Active sessions</h2>
      {state.isPending && <Loading label="Loading sessions" />}
      {state.isError && <ErrorState error={state.error} retry={() => void state.refetch()} />}
      {sessions.length > 0 && (
        <div className="table-wrap" role="region" aria-label="Active sessions" tabIndex={0}>
          <table className="table">
            <caption className="sr-only">Active sessions</caption>
            <thead>
              <tr>
                <th scope="col">Browser</th>
                <th scope="col">Address</th>
                <th scope="col">Signed in</th>
                <th scope="col">Last seen</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {sessions.map((s) => (
                <tr key={s.id}>
                  <td>{s.browser}</td>
                  <td>{s.ip || '—'}</td>
                  <td>
                    <Time iso={s.created_at} />
                  </td>
                  <td>
                    <Time iso={s.last_seen_at} />
                  </td>
                  <td>
                    {s.current ? (
                      <Badge tone="blue">this session</Badge>
                    ) : (
                      <Button
                        className="small"
                        busy={end.isPending && end.variables === s.id}
                        aria-label={`End the ${s.browser} session from ${s.ip || 'an unknown address'}`}
                        onClick={() => end.mutate(s.id)}
                      >
                        End session
                      </Button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div className="actions">
        <Button
          variant="danger"
          busy={everywhere.isPending}
          disabled={sessions.length <= 1}
          onClick={() => everywhere.mutate()}
        >
          Sign out everywhere else
        </Button>
      </div>
    </section>
  );
}

function SignInsCard() {
  const list = useQuery({ queryKey: ['sign-ins'], queryFn: securityApi.signIns });
  return (
    <section className="card card-wide" aria-labelledby="signins-title">
      <h2 id="signins-title">Recent sign-ins</h2>
      {list.isPending && <Loading label="Loading sign-ins" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && list.data.length === 0 && <EmptyState title="No sign-ins recorded yet" />}
      {list.data && list.data.length > 0 && (
        <div className="table-wrap" role="region" aria-label="Recent sign-ins" tabIndex={0}>
          <table className="table">
            <caption className="sr-only">Recent sign-ins</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Result</th>
                <th scope="col">Address</th>
                <th scope="col">Browser</th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((s) => (
                <tr key={s.id}>
                  <td>
                    <Time iso={s.time} />
                  </td>
                  <td title={s.detail}>
                    {s.success ? <Badge tone="green">signed in</Badge> : <Badge tone="red">failed</Badge>}
                  </td>
                  <td>
                    {s.ip || '—'}
                    {s.location && <div className="muted small">{s.location}</div>}
                  </td>
                  <td>{s.browser}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function ActivityCard() {
  const list = useQuery({ queryKey: ['audit'], queryFn: () => securityApi.audit({ limit: 20 }) });
  return (
    <section className="card card-wide" aria-labelledby="activity-title">
      <h2 id="activity-title">Account activity</h2>
      <p className="muted small">Sign-ins, second factor, tokens and team changes of your team, newest first.</p>
      {list.isPending && <Loading label="Loading activity" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && list.data.length > 0 && (
        <div className="table-wrap" role="region" aria-label="Account activity" tabIndex={0}>
          <table className="table">
            <caption className="sr-only">Account activity</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Who</th>
                <th scope="col">Action</th>
                <th scope="col">Detail</th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((e) => (
                <tr key={e.id}>
                  <td>
                    <Time iso={e.time} />
                  </td>
                  <td>{e.actor?.username ?? '—'}</td>
                  <td>
                    <code>{e.action}</code>
                  </td>
                  <td className="detail">{e.detail}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function PolicyCard({ required }: { required: boolean }) {
  const qc = useQueryClient();
  const notice = useNotice();
  const { refresh } = useSession();
  const set = useMutation({
    mutationFn: (on: boolean) => securityApi.setPolicy(on),
    onSuccess: (r) => {
      notice('ok', r.require_two_factor ? 'Two-factor sign-in required of every member' : 'Requirement removed');
      void qc.invalidateQueries({ queryKey: ['security'] });
      refresh();
    },
    onError: (err) => notice('error', err.message),
  });
  return (
    <section className="card" aria-labelledby="policy-title">
      <h2 id="policy-title">Team policy</h2>
      <Switch
        label="Require two-factor sign-in for every member"
        checked={set.isPending ? (set.variables ?? required) : required}
        disabled={set.isPending}
        onChange={(on) => set.mutate(on)}
        hint="Members without it can only reach Account > Security until they set it up. Not you: your own is your choice."
      />
    </section>
  );
}

export function SecurityView() {
  const { account } = useSession();
  const qc = useQueryClient();
  const state = useSecurityState();
  useTitle('Security');
  return (
    <section aria-labelledby="security-title">
      <div className="page-head">
        <h1 id="security-title">Account</h1>
      </div>
      <AccountNav current="security" />
      {state.isError && <ErrorState error={state.error} retry={() => void state.refetch()} />}
      <div className="grid-2">
        <TwoFactorCard
          on={state.data?.two_factor ?? account.two_factor}
          codesLeft={state.data?.recovery_codes_left ?? 0}
          onChange={() => void qc.invalidateQueries({ queryKey: ['security'] })}
        />
        {account.role === 'owner' && <PolicyCard required={state.data?.require_two_factor ?? false} />}
        <SessionsCard />
        <SignInsCard />
        <TokensCard />
        <ActivityCard />
      </div>
    </section>
  );
}

/** What a member sees while its owner requires a second factor it has not set up. */
export function TwoFactorRequired() {
  const { account, refresh } = useSession();
  useTitle('Set up two-factor sign-in');
  return (
    <section aria-labelledby="required-title">
      <div className="page-head">
        <h1 id="required-title">Set up two-factor sign-in</h1>
      </div>
      <div className="alert alert-warn" role="status">
        Two-factor authentication required. Your team's owner asks every member to sign in with a code from an
        authenticator app; set it up below to continue.
      </div>
      <div className="grid-2">
        <TwoFactorCard on={account.two_factor} codesLeft={0} onChange={refresh} />
      </div>
    </section>
  );
}
