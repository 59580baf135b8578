// Sign-in (PROTOCOL 7): the server sets the HttpOnly, SameSite=Strict kw_session cookie; the page
// never sees or stores the token. Wrong passwords and the lockout show the server's own words.
import { useState } from 'react';
import { useMutation } from '@tanstack/react-query';
import { auth } from '../api/endpoints.js';
import type { Account } from '../api/responses.js';
import { Button, Field, FormError } from '../components/ui.js';
import { useTitle } from '../hooks/useTitle.js';

/** `notice`: why a signed-in page came back here (its session was ended), shown above the form. */
export function LoginView({ onSignedIn, notice }: { onSignedIn: (account: Account) => void; notice?: string | null }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  useTitle('Sign in');
  const login = useMutation({ mutationFn: () => auth.login(username, password), onSuccess: (r) => onSignedIn(r.account) });
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
        <h1 id="login-title"><img src="/dashboard/favicon.svg" alt="" width="28" height="28" /> Keywarden</h1>
        {notice && <div className="alert alert-warn" role="status" data-testid="signed-out-reason">{notice}</div>}
        <p className="muted">Sign in to manage your applications, keys and team.</p>
        <Field label="Username">
          {(p) => <input {...p} name="username" autoComplete="username" required value={username} onChange={(e) => setUsername(e.target.value)} autoFocus />}
        </Field>
        <Field label="Password">
          {(p) => <input {...p} name="password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />}
        </Field>
        <FormError error={login.error} />
        <Button type="submit" variant="primary" busy={login.isPending} busyLabel="Signing in">Sign in</Button>
      </form>
    </main>
  );
}
