// Integration: the credentials card (api_key, api_secret hidden from resellers, owner id) and the
// SDK downloads, with the few lines a program needs.
import { useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { apps as appsApi } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { Button, CopyButton, ErrorState, Loading } from '../components/ui.js';
import { isManager } from '../lib/permissions.js';
import { useSession } from '../session.js';

const SDKS = [
  ['typescript', 'TypeScript / Node.js'],
  ['python', 'Python'],
  ['csharp', 'C#'],
  ['cpp', 'C++'],
  ['go', 'Go'],
  ['java', 'Java / Kotlin'],
] as const;

/** The customer portal of this application (docs/protocol.md 14.1): the api_key names it. */
function portalUrl(apiKey: string): string {
  return `${window.location.origin}/portal/?app=${encodeURIComponent(apiKey)}`;
}

export function IntegrationTab({ app }: { app: App }) {
  const { caller } = useSession();
  const creds = useQuery({ queryKey: ['credentials', app.id], queryFn: () => appsApi.credentials(app.id) });
  const [reveal, setReveal] = useState(false);
  return (
    <div className="grid-2">
      <section className="card" aria-labelledby="creds-title">
        <h2 id="creds-title">Credentials</h2>
        {creds.isPending && <Loading label="Loading credentials" />}
        {creds.isError && <ErrorState error={creds.error} retry={() => void creds.refetch()} />}
        {creds.data && (
          <dl className="creds">
            <dt>
              API key <span className="muted small">(public, embedded in clients)</span>
            </dt>
            <dd>
              <code className="mono" data-testid="api-key">
                {creds.data.api_key}
              </code>{' '}
              <CopyButton text={creds.data.api_key} label="Copy API key" />
            </dd>
            {creds.data.api_secret !== undefined && (
              <>
                <dt>
                  API secret{' '}
                  <span className="muted small">
                    (signs requests; keep it out of shipped programs unless signing is required)
                  </span>
                </dt>
                <dd>
                  <code className="mono" data-testid="api-secret">
                    {reveal ? creds.data.api_secret : '•'.repeat(24)}
                  </code>{' '}
                  <Button variant="ghost" onClick={() => setReveal(!reveal)} aria-pressed={reveal}>
                    {reveal ? 'Hide' : 'Reveal'}
                  </Button>
                  <CopyButton text={creds.data.api_secret} label="Copy API secret" />
                </dd>
              </>
            )}
            <dt>Account owner id</dt>
            <dd>
              <code className="mono">{creds.data.owner_id}</code>{' '}
              <CopyButton text={creds.data.owner_id} label="Copy owner id" />
            </dd>
            <dt>
              Customer portal{' '}
              <span className="muted small">
                ({app.portal_enabled ? 'on' : 'off: turn it on in Settings'}; link your customers here)
              </span>
            </dt>
            <dd>
              <a href={portalUrl(creds.data.api_key)} target="_blank" rel="noreferrer">
                Customer portal
              </a>{' '}
              <CopyButton text={portalUrl(creds.data.api_key)} label="Copy customer portal link" />
            </dd>
            <dt>Application id</dt>
            <dd>
              <code className="mono">{app.id}</code>
            </dd>
          </dl>
        )}
      </section>
      <section className="card" aria-labelledby="sdk-title">
        <h2 id="sdk-title">Client SDKs</h2>
        {isManager(caller) ? (
          <>
            <p className="muted">
              Each archive holds the library, an example program and <code>keywarden.json</code> with this application's
              settings and the response-signing keys to pin.
            </p>
            <ul className="sdk-list">
              {SDKS.map(([lang, label]) => (
                <li key={lang}>
                  <a className="btn btn-plain" href={appsApi.sdkUrl(app.id, lang)} download>
                    Download {label}
                  </a>
                </li>
              ))}
            </ul>
          </>
        ) : (
          <p className="muted">SDK downloads are available to the application's owner and admins.</p>
        )}
        <pre className="code" aria-label="Example">
          <code>{`import { Client } from '@keywarden/client';
const client = Client.fromConfig('keywarden.json');
await client.init();
const { level, expiresAt } = await client.activateLicense(key);`}</code>
        </pre>
      </section>
    </div>
  );
}
