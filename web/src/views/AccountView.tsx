// The signed-in account: own password (other sessions are signed out), the global alert webhook
// (not for resellers: docs/spec.md "Alert webhook" rule 3) and its signing secret. Security (second
// factor, sessions, API tokens) is the Account's other tab (SecurityView.tsx). Below: the webhook delivery log.
import { useState } from 'react';
import { useMutation } from '@tanstack/react-query';
import { auth, team as teamApi } from '../api/endpoints.js';
import { Badge, Button, CopyButton, Field, FormError, Time, fieldError } from '../components/ui.js';
import { PERMISSION_KEYS, PERMISSION_LABELS } from '../lib/permissions.js';
import { webhookProblem } from '../lib/urls.js';
import { useTitle } from '../hooks/useTitle.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';
import { AccountNav } from './SecurityView.js';
import { DeliveriesCard } from './DeliveriesCard.js';

export function AccountView() {
  const { account, refresh } = useSession();
  const notice = useNotice();
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [webhook, setWebhook] = useState(account.webhook ?? '');
  const [webhookLocal, setWebhookLocal] = useState<string | undefined>(undefined);
  useTitle('Account');
  const password = useMutation({
    mutationFn: () => auth.changePassword(current, next),
    onSuccess: () => {
      setCurrent('');
      setNext('');
      notice('ok', 'Password changed; your other sessions were signed out');
    },
  });
  const hook = useMutation({
    mutationFn: () => teamApi.setOwnWebhook(webhook),
    onSuccess: () => {
      notice('ok', webhook ? 'Webhook saved' : 'Webhook cleared');
      refresh();
    },
  });
  return (
    <section aria-labelledby="account-title">
      <div className="page-head">
        <h1 id="account-title">Account</h1>
      </div>
      <AccountNav current="profile" />
      <div className="grid-2">
        <div className="card">
          <h2>{account.display_name || account.username}</h2>
          <dl className="facts">
            <dt>Username</dt>
            <dd>{account.username}</dd>
            <dt>Role</dt>
            <dd>
              <Badge tone="blue">{account.role}</Badge>
            </dd>
            {account.email && (
              <>
                <dt>Email</dt>
                <dd>{account.email}</dd>
              </>
            )}
            {account.role === 'reseller' && (
              <>
                <dt>Credits</dt>
                <dd data-testid="credits">{account.credits ?? 'unlimited'}</dd>
              </>
            )}
            {account.subscription_expires_at && (
              <>
                <dt>Subscription</dt>
                <dd>
                  until <Time iso={account.subscription_expires_at} />
                </dd>
              </>
            )}
            <dt>Member since</dt>
            <dd>
              <Time iso={account.created_at} />
            </dd>
          </dl>
          {account.role === 'reseller' && (
            <>
              <h3>Your permissions</h3>
              <ul className="perm-list">
                {PERMISSION_KEYS.map((k) => (
                  <li key={k}>
                    {account.permissions?.[k] ? '✓' : '✗'} {PERMISSION_LABELS[k]}
                  </li>
                ))}
              </ul>
            </>
          )}
        </div>
        <form
          noValidate
          className="card"
          aria-label="Change password"
          onSubmit={(e) => {
            e.preventDefault();
            password.mutate();
          }}
        >
          <h2>Change password</h2>
          <Field label="Current password" error={fieldError(password.error, 'current_password')}>
            {(p) => (
              <input
                {...p}
                type="password"
                autoComplete="current-password"
                value={current}
                onChange={(e) => setCurrent(e.target.value)}
              />
            )}
          </Field>
          <Field
            label="New password"
            error={fieldError(password.error, 'password')}
            hint="At least 8 characters, a letter and a non-letter, not your username."
          >
            {(p) => (
              <input
                {...p}
                type="password"
                autoComplete="new-password"
                value={next}
                onChange={(e) => setNext(e.target.value)}
              />
            )}
          </Field>
          <FormError error={password.error} fields={['current_password', 'password']} />
          <div className="actions">
            <Button type="submit" variant="primary" busy={password.isPending} busyLabel="Changing">
              Change password
            </Button>
          </div>
        </form>
        {account.role !== 'reseller' && (
          <form
            noValidate
            className="card"
            aria-label="Global webhook"
            onSubmit={(e) => {
              e.preventDefault();
              const problem = webhookProblem(webhook);
              setWebhookLocal(problem);
              if (!problem) hook.mutate();
            }}
          >
            <h2>Global alert webhook</h2>
            <p className="muted small">
              Used for your applications that have no webhook of their own. Blank clears it.
            </p>
            <Field label="Webhook URL" error={webhookLocal ?? fieldError(hook.error, 'webhook')}>
              {(p) => (
                <input {...p} value={webhook} onChange={(e) => setWebhook(e.target.value)} placeholder="https://" />
              )}
            </Field>
            {account.webhook_secret && (
              <p className="small">
                Signing secret (<code>X-Keywarden-Signature</code>):{' '}
                <code className="mono">{account.webhook_secret.slice(0, 6)}…</code>{' '}
                <CopyButton text={account.webhook_secret} label="Copy secret" />
              </p>
            )}
            <FormError error={hook.error} fields={['webhook']} />
            <div className="actions">
              <Button type="submit" busy={hook.isPending} busyLabel="Saving">
                Save webhook
              </Button>
            </div>
          </form>
        )}
        <DeliveriesCard />
      </div>
    </section>
  );
}
