// Two-factor sign-in for the signed-in account (docs/protocol.md 13.2): set up (a QR code of the otpauth
// URL, drawn as SVG by the qrcode library and shown as an <img> data URL, so the page's strict CSP
// needs no inline script or style; the secret as text for typing in), confirm with a code, keep the
// ten recovery codes (copy or download: they are shown once), or turn it off with password and code.
import { useEffect, useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { toString as qrSvg } from 'qrcode';
import { twoFactor } from '../api/endpoints.js';
import type { TwoFactorSetup } from '../api/responses.js';
import { Badge, Button, CopyButton, Field, FormError, fieldError } from '../components/ui.js';
import { saveFile } from '../lib/download.js';
import { plural } from '../lib/plural.js';
import { useNotice } from '../notices.js';
import { useSession } from '../session.js';

function QrCode({ text }: { text: string }) {
  const [src, setSrc] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    void qrSvg(text, { type: 'svg', margin: 2, errorCorrectionLevel: 'M' }).then((svg) => {
      if (live) setSrc(`data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`);
    });
    return () => {
      live = false;
    };
  }, [text]);
  return src ? (
    <img className="qr" src={src} width={200} height={200} alt="QR code to scan with your authenticator app" />
  ) : (
    <div className="qr" aria-hidden="true" />
  );
}

function RecoveryCodes({ codes, username, onDone }: { codes: string[]; username: string; onDone: () => void }) {
  const text = codes.join('\n') + '\n';
  return (
    <div>
      <div className="alert alert-warn" role="status">
        Two-factor sign-in is on. Keep these recovery codes somewhere safe: each signs you in once if you lose your
        authenticator app, and they are shown only now.
      </div>
      <ol className="recovery-codes" aria-label="Recovery codes">
        {codes.map((c) => (
          <li key={c}>
            <code className="mono">{c}</code>
          </li>
        ))}
      </ol>
      <div className="actions">
        <CopyButton text={text} label="Copy codes" />
        <Button onClick={() => saveFile(`keywarden-recovery-codes-${username}.txt`, text, 'text/plain')}>
          Download codes
        </Button>
        <Button variant="primary" onClick={onDone}>
          Done
        </Button>
      </div>
    </div>
  );
}

/** `on`: the account's current state; `codesLeft`: unused recovery codes. */
export function TwoFactorCard({ on, codesLeft, onChange }: { on: boolean; codesLeft: number; onChange: () => void }) {
  const { account, refresh } = useSession();
  const notice = useNotice();
  const qc = useQueryClient();
  const [pending, setPending] = useState<TwoFactorSetup | null>(null);
  const [code, setCode] = useState('');
  const [password, setPassword] = useState('');
  const [codes, setCodes] = useState<string[] | null>(null);
  const setup = useMutation({ mutationFn: twoFactor.setup, onSuccess: setPending });
  const enable = useMutation({
    mutationFn: () => twoFactor.enable(code.trim()),
    onSuccess: (r) => {
      setCodes(r.recovery_codes);
      setPending(null);
      setCode('');
    },
  });
  const disable = useMutation({
    mutationFn: () => twoFactor.disable(password, code.trim()),
    onSuccess: () => {
      setPassword('');
      setCode('');
      notice('ok', 'Two-factor sign-in turned off; your other sessions were signed out');
      onChange();
      refresh();
    },
  });

  if (codes) {
    return (
      <section className="card" aria-labelledby="tfa-title">
        <h2 id="tfa-title">Two-factor sign-in</h2>
        <RecoveryCodes
          codes={codes}
          username={account.username}
          onDone={() => {
            setCodes(null);
            onChange();
            refresh();
            void qc.invalidateQueries();
          }}
        />
      </section>
    );
  }
  return (
    <section className="card" aria-labelledby="tfa-title">
      <h2 id="tfa-title">Two-factor sign-in {on ? <Badge tone="green">on</Badge> : <Badge tone="grey">off</Badge>}</h2>
      {on ? (
        <form
          noValidate
          aria-label="Turn off two-factor sign-in"
          onSubmit={(e) => {
            e.preventDefault();
            disable.mutate();
          }}
        >
          <p className="muted small">
            Signing in asks for a code from your authenticator app. {plural(codesLeft, 'recovery code')} left.
          </p>
          <Field label="Password" error={fieldError(disable.error, 'password')}>
            {(p) => (
              <input
                {...p}
                type="password"
                autoComplete="current-password"
                value={password}
                onChange={(e) => setPassword(e.target.value)}
              />
            )}
          </Field>
          <Field label="Code or recovery code" error={fieldError(disable.error, 'code')}>
            {(p) => (
              <input {...p} autoComplete="one-time-code" value={code} onChange={(e) => setCode(e.target.value)} />
            )}
          </Field>
          <FormError error={disable.error} fields={['password', 'code']} />
          <div className="actions">
            <Button type="submit" variant="danger" busy={disable.isPending} busyLabel="Turning off">
              Turn off two-factor
            </Button>
          </div>
        </form>
      ) : pending ? (
        <form
          noValidate
          aria-label="Turn on two-factor sign-in"
          onSubmit={(e) => {
            e.preventDefault();
            enable.mutate();
          }}
        >
          <p className="muted small">
            Scan this code with an authenticator app (Aegis, Google Authenticator, 1Password…), then enter the 6-digit
            code it shows.
          </p>
          <QrCode text={pending.otpauth_url} />
          <p className="small">
            Or type the key in:{' '}
            <code className="mono" data-testid="totp-secret">
              {pending.secret}
            </code>{' '}
            <CopyButton text={pending.secret} label="Copy key" />
          </p>
          <Field label="Code from the app" error={fieldError(enable.error, 'code')}>
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                autoComplete="one-time-code"
                value={code}
                onChange={(e) => setCode(e.target.value)}
              />
            )}
          </Field>
          <FormError error={enable.error} fields={['code']} />
          <div className="actions">
            <Button onClick={() => setPending(null)}>Cancel</Button>
            <Button type="submit" variant="primary" busy={enable.isPending} busyLabel="Turning on">
              Turn on two-factor
            </Button>
          </div>
        </form>
      ) : (
        <>
          <p className="muted small">
            Protect your sign-in with a second factor: a code from an authenticator app on your phone.
          </p>
          <FormError error={setup.error} />
          <div className="actions">
            <Button variant="primary" busy={setup.isPending} onClick={() => setup.mutate()}>
              Set up two-factor
            </Button>
          </div>
        </>
      )}
    </section>
  );
}
