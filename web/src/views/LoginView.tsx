// Sign-in (docs/protocol.md 7, 13.2): the server sets the HttpOnly, SameSite=Strict kw_session cookie; the
// page never sees or stores the token. Wrong passwords and the lockout show the server's own words.
// An account with two-factor sign-in on is asked, after its password, for a code from its
// authenticator app or one of its recovery codes.
import { useState } from 'react';
import { useMutation } from '@tanstack/react-query';
import { auth } from '../api/endpoints.js';
import { ApiError } from '../api/errors.js';
import type { Account } from '../api/responses.js';
import { Button, Field, FormError } from '../components/ui.js';
import { useTitle } from '../hooks/useTitle.js';

/** The server's answer to a right password without a code (docs/protocol.md 13.2). */
const CODE_REQUIRED = 'Two-factor code required';

/** `notice`: why a signed-in page came back here (its session was ended), shown above the form. */
export function LoginView({ onSignedIn, notice }: { onSignedIn: (account: Account) => void; notice?: string | null }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [otp, setOtp] = useState('');
  const [askCode, setAskCode] = useState(false);
  useTitle('Sign in');
  const login = useMutation({
    mutationFn: () => auth.login(username, password, askCode ? otp.trim() : undefined),
    onSuccess: (r) => onSignedIn(r.account),
    onError: (err) => {
      if (err instanceof ApiError && err.status === 401 && err.message === CODE_REQUIRED) setAskCode(true);
    },
  });
  // Being asked for the code is a step, not a failure.
  const error = login.error instanceof ApiError && login.error.message === CODE_REQUIRED ? null : login.error;
  return (
    <main className="login">
      <form
        noValidate
        className="card login-card"
        aria-labelledby="login-title"
        onSubmit={(e) => {
          e.preventDefault();
          login.mutate();
        }}
      >
        <h1 id="login-title">
          <img src="/dashboard/favicon.svg" alt="" width="28" height="28" /> Keywarden
        </h1>
        {notice && (
          <div className="alert alert-warn" role="status" data-testid="signed-out-reason">
            {notice}
          </div>
        )}
        {!askCode ? (
          <>
            <p className="muted">Sign in to manage your applications, keys and team.</p>
            <Field label="Username">
              {(p) => (
                <input
                  {...p}
                  name="username"
                  autoComplete="username"
                  required
                  value={username}
                  onChange={(e) => setUsername(e.target.value)}
                  autoFocus
                />
              )}
            </Field>
            <Field label="Password">
              {(p) => (
                <input
                  {...p}
                  name="password"
                  type="password"
                  autoComplete="current-password"
                  required
                  value={password}
                  onChange={(e) => setPassword(e.target.value)}
                />
              )}
            </Field>
          </>
        ) : (
          <>
            <p className="muted" role="status">
              Enter the 6-digit code from your authenticator app for <strong>{username}</strong>, or one of your
              recovery codes.
            </p>
            <Field label="Two-factor code">
              {(p) => (
                <input
                  {...p}
                  name="otp"
                  autoComplete="one-time-code"
                  spellCheck={false}
                  required
                  value={otp}
                  onChange={(e) => setOtp(e.target.value)}
                  autoFocus
                />
              )}
            </Field>
          </>
        )}
        <FormError error={error} />
        <Button type="submit" variant="primary" busy={login.isPending} busyLabel="Signing in">
          Sign in
        </Button>
        {askCode && (
          <Button
            variant="ghost"
            onClick={() => {
              setAskCode(false);
              setOtp('');
              setPassword('');
              login.reset();
            }}
          >
            Use another account
          </Button>
        )}
      </form>
    </main>
  );
}
