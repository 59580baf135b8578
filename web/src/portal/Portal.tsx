import { useCallback, useEffect, useState, type FormEvent } from 'react';
import { call, failureText, type Me } from './api.js';
import { when } from './time.js';
import { OfflineActivation } from './OfflineActivation.js';
// Only the small file helper: the portal keeps a bundle of its own.
import { saveFile } from '../lib/download.js';

const STATUS_TEXT: Record<Me['license']['computed_status'], string> = {
  active: 'Active',
  banned: 'Banned',
  unactivated: 'Not activated yet',
  expired: 'Expired',
};

/** The application's api_key: the vendor links to /portal/?app=<api_key>. */
function appKey(): string {
  return new URLSearchParams(window.location.search).get('app') ?? '';
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [mode, setMode] = useState<'key' | 'user'>('key');
  const [license, setLicense] = useState('');
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const api_key = appKey();
      await call('POST', '/api/portal/login', mode === 'key' ? { api_key, license } : { api_key, username, password });
      onSignedIn();
    } catch (err) {
      setError(failureText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card" onSubmit={submit}>
      <h1>Sign in</h1>
      <div className="tabs" role="group" aria-label="Sign in with">
        <button type="button" aria-pressed={mode === 'key'} onClick={() => setMode('key')}>
          License key
        </button>
        <button type="button" aria-pressed={mode === 'user'} onClick={() => setMode('user')}>
          Username
        </button>
      </div>
      {mode === 'key' ? (
        <label>
          License key
          <input value={license} onChange={(e) => setLicense(e.target.value)} autoComplete="off" required />
        </label>
      ) : (
        <>
          <label>
            Username
            <input value={username} onChange={(e) => setUsername(e.target.value)} autoComplete="username" required />
          </label>
          <label>
            Password
            <input
              type="password"
              value={password}
              onChange={(e) => setPassword(e.target.value)}
              autoComplete="current-password"
              required
            />
          </label>
        </>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      <button type="submit" disabled={busy}>
        Sign in
      </button>
    </form>
  );
}

function PasswordForm() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [note, setNote] = useState('');
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    try {
      await call('POST', '/api/portal/password', { current_password: current, password: next });
      setNote('Password changed.');
      setCurrent('');
      setNext('');
    } catch (err) {
      setNote(failureText(err));
    }
  };
  return (
    <form className="card" onSubmit={submit}>
      <h2>Change password</h2>
      <label>
        Current password
        <input
          type="password"
          value={current}
          onChange={(e) => setCurrent(e.target.value)}
          autoComplete="current-password"
          required
        />
      </label>
      <label>
        New password
        <input
          type="password"
          value={next}
          onChange={(e) => setNext(e.target.value)}
          autoComplete="new-password"
          required
        />
      </label>
      {note && <p role="status">{note}</p>}
      <button type="submit">Change password</button>
    </form>
  );
}

function License({ me, reload, signOut }: { me: Me; reload: () => void; signOut: () => void }) {
  const [note, setNote] = useState('');
  const l = me.license;
  const reset = async (hwid?: string) => {
    try {
      const r = await call<{ next_reset_at: string | null }>('POST', '/api/portal/reset-hwid', hwid ? { hwid } : {});
      setNote(`Devices reset. ${r.next_reset_at ? `Next reset possible ${when(r.next_reset_at)}.` : ''}`);
    } catch (err) {
      setNote(failureText(err));
    }
    reload();
  };
  const onCooldown = me.next_reset_at !== null;
  const offline = me.app.offline_days > 0;
  /** docs/protocol.md 14.3: a signed license file (12.5) for a machine without internet access. */
  const download = async (hwid: string) => {
    try {
      const r = await call<{ license_file: string }>('POST', '/api/portal/offline', { hwid });
      saveFile(`${l.key_preview.replace(/\*+/g, '-')}.kwlic`, r.license_file + '\n', 'application/octet-stream');
      setNote('Offline license file downloaded.');
    } catch (err) {
      setNote(failureText(err));
    }
  };
  return (
    <>
      <header className="bar">
        <strong>{me.app.name}</strong>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <section className="card">
        <h1>Your license</h1>
        <dl>
          <dt>Key</dt>
          <dd>
            <code>{l.key_preview}</code>
          </dd>
          <dt>Status</dt>
          <dd>{STATUS_TEXT[l.computed_status]}</dd>
          <dt>Expires</dt>
          <dd>{l.expires_at ? when(l.expires_at) : l.computed_status === 'unactivated' ? '—' : 'Never'}</dd>
          <dt>Level</dt>
          <dd>{l.level}</dd>
          {l.entitlements.length > 0 && (
            <>
              <dt>Features</dt>
              <dd>{l.entitlements.join(', ')}</dd>
            </>
          )}
          <dt>Running now</dt>
          <dd>{l.live_sessions}</dd>
          {me.user && (
            <>
              <dt>Username</dt>
              <dd>{me.user.username}</dd>
            </>
          )}
        </dl>
      </section>
      <section className="card">
        <h2>
          Devices ({l.devices.length} of {l.max_devices})
        </h2>
        {l.devices.length === 0 && <p className="muted">No device is bound. The next one to start the program is.</p>}
        <ul className="devices">
          {l.devices.map((d) => (
            <li key={d.hwid}>
              <code className="hwid">{d.hwid}</code>
              <span className="muted">
                First seen {when(d.first_seen)} · last seen {when(d.last_seen)}
              </span>
              <span className="device-actions">
                {offline && (
                  <button type="button" onClick={() => void download(d.hwid)}>
                    Download offline file
                  </button>
                )}
                <button type="button" disabled={onCooldown} onClick={() => void reset(d.hwid)}>
                  Reset this device
                </button>
              </span>
            </li>
          ))}
        </ul>
        {l.devices.length > 1 && (
          <button type="button" disabled={onCooldown} onClick={() => void reset()}>
            Reset all devices
          </button>
        )}
        {offline && l.devices.length > 0 && (
          <p className="muted">
            An offline file lets a device without internet access run for {me.app.offline_days}{' '}
            {me.app.offline_days === 1 ? 'day' : 'days'} (or until the license expires).
          </p>
        )}
        {onCooldown && <p className="muted">Next reset possible {when(me.next_reset_at)}.</p>}
        {note && <p role="status">{note}</p>}
      </section>
      <OfflineActivation onDone={reload} />
      {me.user && <PasswordForm />}
    </>
  );
}

export function Portal() {
  const [me, setMe] = useState<Me | null>(null);
  const [state, setState] = useState<'loading' | 'signed-out' | 'ready'>('loading');
  const load = useCallback(() => {
    call<Me>('GET', '/api/portal/me')
      .then((m) => {
        setMe(m);
        setState('ready');
      })
      .catch(() => setState('signed-out'));
  }, []);
  useEffect(load, [load]);
  const signOut = () => {
    void call('POST', '/api/portal/logout', {})
      .catch(() => undefined)
      .then(() => {
        setMe(null);
        setState('signed-out');
      });
  };
  return (
    <main className="portal">
      {state === 'loading' && <p>Loading…</p>}
      {state === 'signed-out' && <SignIn onSignedIn={load} />}
      {state === 'ready' && me && <License me={me} reload={load} signOut={signOut} />}
    </main>
  );
}
