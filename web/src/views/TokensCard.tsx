// API tokens for automation (docs/protocol.md 13.1): made here with a name, scopes, the applications they
// reach and an expiry; the token is shown once, right after it is made. The list shows when and
// from where each was last used; a token is revoked at once.
import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, tokens as tokensApi, type TokenScope } from '../api/endpoints.js';
import type { CreatedToken } from '../api/responses.js';
import {
  Badge,
  Button,
  CopyButton,
  EmptyState,
  ErrorState,
  Field,
  FormError,
  Loading,
  Time,
  fieldError,
} from '../components/ui.js';
import { useNotice } from '../notices.js';

const SCOPES: readonly [TokenScope, string][] = [
  ['apps:read', 'Read applications, bans, stats'],
  ['apps:write', 'Change applications and bans'],
  ['licenses:read', 'Read keys'],
  ['licenses:write', 'Generate and change keys'],
  ['users:read', 'Read end users'],
  ['users:write', 'Change end users'],
  ['logs:read', 'Read logs and live events'],
  ['team:read', 'Read the team'],
  ['team:write', 'Change the team'],
];
const EXPIRY: readonly [string, string][] = [
  ['', 'Never'],
  ['30', 'In 30 days'],
  ['90', 'In 90 days'],
  ['365', 'In a year'],
];

function CreateToken({ onCreated }: { onCreated: (t: CreatedToken) => void }) {
  const apps = useQuery({ queryKey: ['apps'], queryFn: appsApi.list });
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<TokenScope[]>([]);
  const [allApps, setAllApps] = useState(true);
  const [chosen, setChosen] = useState<string[]>([]);
  const [days, setDays] = useState('');
  const create = useMutation({
    mutationFn: () =>
      tokensApi.create({
        name,
        scopes,
        app_ids: allApps ? null : chosen,
        expires_at: days ? new Date(Date.now() + Number(days) * 86_400_000).toISOString() : null,
      }),
    onSuccess: (t) => {
      setName('');
      onCreated(t);
    },
  });
  const toggle = <T,>(list: T[], v: T, on: boolean) => (on ? [...list, v] : list.filter((x) => x !== v));
  return (
    <form
      noValidate
      aria-label="New API token"
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <h3>New token</h3>
      <Field label="Token name" error={fieldError(create.error, 'name')} hint="What uses it, e.g. “shop webhook”.">
        {(p) => <input {...p} value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />}
      </Field>
      <fieldset className="checks">
        <legend>Scopes</legend>
        {SCOPES.map(([s, label]) => (
          <label key={s}>
            <input
              type="checkbox"
              checked={scopes.includes(s)}
              onChange={(e) => setScopes(toggle(scopes, s, e.target.checked))}
            />{' '}
            <code>{s}</code> <span className="muted small">{label}</span>
          </label>
        ))}
        {fieldError(create.error, 'scopes') && (
          <div className="field-error" role="alert">
            {fieldError(create.error, 'scopes')}
          </div>
        )}
      </fieldset>
      <fieldset className="checks">
        <legend>Applications</legend>
        <label>
          <input type="checkbox" checked={allApps} onChange={(e) => setAllApps(e.target.checked)} /> Every application I
          can reach
        </label>
        {!allApps &&
          (apps.data ?? []).map((a) => (
            <label key={a.id}>
              <input
                type="checkbox"
                checked={chosen.includes(a.id)}
                onChange={(e) => setChosen(toggle(chosen, a.id, e.target.checked))}
              />{' '}
              {a.name}
            </label>
          ))}
      </fieldset>
      <Field label="Expires" error={fieldError(create.error, 'expires_at')}>
        {(p) => (
          <select {...p} value={days} onChange={(e) => setDays(e.target.value)}>
            {EXPIRY.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        )}
      </Field>
      <FormError error={create.error} fields={['name', 'scopes', 'expires_at']} />
      <div className="actions">
        <Button type="submit" variant="primary" busy={create.isPending} busyLabel="Creating">
          Create token
        </Button>
      </div>
    </form>
  );
}

export function TokensCard() {
  const qc = useQueryClient();
  const notice = useNotice();
  const list = useQuery({ queryKey: ['tokens'], queryFn: tokensApi.list });
  const [made, setMade] = useState<CreatedToken | null>(null);
  const revoke = useMutation({
    mutationFn: (id: string) => tokensApi.revoke(id),
    onSuccess: () => {
      notice('ok', 'Token revoked');
      void qc.invalidateQueries({ queryKey: ['tokens'] });
    },
    onError: (err) => notice('error', err.message),
  });
  return (
    <section className="card card-wide" aria-labelledby="tokens-title">
      <h2 id="tokens-title">API tokens</h2>
      <p className="muted small">
        For scripts and shops: <code>Authorization: Bearer kwt_…</code> acts as you, limited to the token's scopes and
        applications. See the Automation guide in the documentation.
      </p>
      {made && (
        <div className="alert alert-warn" role="status" data-testid="new-token">
          <p>
            Token <strong>{made.name}</strong> created. Copy it now: it is shown only once.
          </p>
          <p>
            <code className="mono token-value">{made.token}</code> <CopyButton text={made.token} label="Copy token" />
          </p>
          <Button onClick={() => setMade(null)}>I have copied it</Button>
        </div>
      )}
      {list.isPending && <Loading label="Loading tokens" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && list.data.length === 0 && <EmptyState title="No API tokens yet" />}
      {list.data && list.data.length > 0 && (
        <div className="table-wrap" role="region" aria-label="API tokens" tabIndex={0}>
          <table className="table">
            <caption className="sr-only">API tokens</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Scopes</th>
                <th scope="col">Applications</th>
                <th scope="col">Expires</th>
                <th scope="col">Last used</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((t) => (
                <tr key={t.id}>
                  <td>{t.name}</td>
                  <td>
                    {t.scopes.map((s) => (
                      <code key={s} className="scope">
                        {s}
                      </code>
                    ))}
                  </td>
                  <td>{t.app_ids === null ? 'all' : t.app_ids.length}</td>
                  <td>
                    {t.expires_at && Date.parse(t.expires_at) <= Date.now() ? (
                      <Badge tone="red">expired</Badge>
                    ) : (
                      <Time iso={t.expires_at} empty="never" />
                    )}
                  </td>
                  <td>
                    <Time iso={t.last_used_at} empty="never" />
                    {t.last_used_ip && <div className="muted small">{t.last_used_ip}</div>}
                  </td>
                  <td>
                    <Button
                      variant="danger"
                      className="small"
                      busy={revoke.isPending && revoke.variables === t.id}
                      aria-label={`Revoke ${t.name}`}
                      onClick={() => revoke.mutate(t.id)}
                    >
                      Revoke
                    </Button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <CreateToken
        onCreated={(t) => {
          setMade(t);
          void qc.invalidateQueries({ queryKey: ['tokens'] });
        }}
      />
    </section>
  );
}
