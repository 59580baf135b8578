// Releases (docs/releases.md): drafts, published and yanked releases with their channels and download
// counts; artifacts uploaded as the raw file with a progress bar; publish and yank after confirmation;
// a release's entitlements picked from the application's catalogue.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, releases as releasesApi, type Release } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { EntitlementPicks } from '../components/EntitlementPicks.js';
import { Badge, Button, Confirm, EmptyState, ErrorState, Field, FormError, Loading, Time } from '../components/ui.js';

const CHANNELS = ['stable', 'rc', 'beta', 'alpha', 'dev'] as const;
const STATUS_TONE = { draft: 'grey', published: 'green', yanked: 'red' } as const;

function CreateRelease({ app, onCreated }: { app: App; onCreated: () => void }) {
  const [version, setVersion] = useState('');
  const [channel, setChannel] = useState<(typeof CHANNELS)[number]>('stable');
  const [notes, setNotes] = useState('');
  const [entitlements, setEntitlements] = useState<string[]>([]);
  const catalogue = useQuery({ queryKey: ['entitlements', app.id], queryFn: () => appsApi.entitlements(app.id) });
  const create = useMutation({
    mutationFn: () => releasesApi.create(app.id, { version, channel, notes, entitlements }),
    onSuccess: () => {
      setVersion('');
      setNotes('');
      setEntitlements([]);
      onCreated();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };
  return (
    <form className="card" onSubmit={submit} aria-labelledby="new-release">
      <h2 id="new-release">New release</h2>
      <Field label="Version" hint="SemVer, e.g. 2.4.0 or 2.5.0-beta.1">
        {(p) => <input {...p} value={version} onChange={(e) => setVersion(e.target.value)} required />}
      </Field>
      <Field label="Channel">
        {(p) => (
          <select {...p} value={channel} onChange={(e) => setChannel(e.target.value as (typeof CHANNELS)[number])}>
            {CHANNELS.map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Notes">
        {(p) => <textarea {...p} value={notes} maxLength={10_000} onChange={(e) => setNotes(e.target.value)} />}
      </Field>
      <EntitlementPicks
        catalogue={catalogue.data?.entitlements ?? []}
        value={entitlements}
        onChange={setEntitlements}
        name="release-entitlement"
      />
      <FormError error={create.error} fields={['version', 'channel', 'notes', 'entitlements']} />
      <Button type="submit" variant="primary" busy={create.isPending}>
        Create draft
      </Button>
    </form>
  );
}

function Upload({ release, onDone }: { release: Release; onDone: () => void }) {
  const [file, setFile] = useState<File | null>(null);
  const [platform, setPlatform] = useState('any');
  const [arch, setArch] = useState('any');
  const [progress, setProgress] = useState<number | null>(null);
  const upload = useMutation({
    mutationFn: (f: File) => releasesApi.upload(release.id, f, { platform, arch }, setProgress),
    onSuccess: () => {
      setFile(null);
      onDone();
    },
    onSettled: () => setProgress(null),
  });
  return (
    <form
      className="row upload"
      aria-label={`Upload an artifact to ${release.version}`}
      onSubmit={(e) => {
        e.preventDefault();
        if (file) upload.mutate(file);
      }}
    >
      <input
        type="file"
        aria-label="Artifact file"
        onChange={(e) => setFile(e.target.files?.[0] ?? null)}
        disabled={upload.isPending}
      />
      <input aria-label="Platform" value={platform} size={8} onChange={(e) => setPlatform(e.target.value)} />
      <input aria-label="Arch" value={arch} size={8} onChange={(e) => setArch(e.target.value)} />
      <Button type="submit" disabled={!file} busy={upload.isPending}>
        Upload
      </Button>
      {progress !== null && (
        <progress max={1} value={progress} aria-label={`Uploading ${file?.name ?? ''}`}>
          {Math.round(progress * 100)}%
        </progress>
      )}
      <FormError error={upload.error} />
    </form>
  );
}

function ReleaseCard({ r, onChanged }: { r: Release; onChanged: () => void }) {
  const [asking, setAsking] = useState<'publish' | 'yank' | 'delete' | null>(null);
  const act = useMutation({
    mutationFn: (what: 'publish' | 'yank' | 'delete') =>
      what === 'publish'
        ? releasesApi.publish(r.id)
        : what === 'yank'
          ? releasesApi.yank(r.id)
          : releasesApi.remove(r.id),
    onSuccess: () => {
      setAsking(null);
      onChanged();
    },
  });
  return (
    <li className="card" data-testid={`release-${r.version}`}>
      <h3>
        {r.version} <Badge tone="blue">{r.channel}</Badge> <Badge tone={STATUS_TONE[r.status]}>{r.status}</Badge>
      </h3>
      <dl className="creds">
        <dt>Downloads</dt>
        <dd data-testid="release-downloads">{r.downloads}</dd>
        <dt>Published</dt>
        <dd>
          <Time iso={r.published_at} />
        </dd>
        {r.entitlements.length > 0 && (
          <>
            <dt>Entitlements</dt>
            <dd>{r.entitlements.join(', ')}</dd>
          </>
        )}
        {r.notes && (
          <>
            <dt>Notes</dt>
            <dd className="pre">{r.notes}</dd>
          </>
        )}
      </dl>
      {r.artifacts.length === 0 ? (
        <p className="muted small">No artifacts yet.</p>
      ) : (
        <table className="table">
          <thead>
            <tr>
              <th>File</th>
              <th>Platform</th>
              <th>Size</th>
              <th>SHA-256</th>
              <th>Downloads</th>
            </tr>
          </thead>
          <tbody>
            {r.artifacts.map((a) => (
              <tr key={a.id}>
                <td>
                  <a href={releasesApi.downloadUrl(r.id, a.filename)} download>
                    {a.filename}
                  </a>
                </td>
                <td>
                  {a.platform}/{a.arch}
                </td>
                <td>{a.size.toLocaleString('en-US')} bytes</td>
                <td>
                  <code className="mono" title={a.sha256}>
                    {a.sha256.slice(0, 12)}…
                  </code>
                </td>
                <td>{a.downloads}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {r.status === 'draft' && <Upload release={r} onDone={onChanged} />}
      <div className="row">
        {r.status === 'draft' && (
          <>
            <Button variant="primary" onClick={() => setAsking('publish')} disabled={r.artifacts.length === 0}>
              Publish
            </Button>
            <Button variant="ghost" onClick={() => setAsking('delete')}>
              Delete draft
            </Button>
          </>
        )}
        {r.status === 'published' && (
          <Button variant="ghost" onClick={() => setAsking('yank')}>
            Yank
          </Button>
        )}
      </div>
      <Confirm
        open={asking !== null}
        title={
          asking === 'publish'
            ? `Publish ${r.version}?`
            : asking === 'yank'
              ? `Yank ${r.version}?`
              : `Delete draft ${r.version}?`
        }
        message={
          asking === 'publish'
            ? `Copies on ${r.channel} and less stable channels will be offered ${r.version}. Its files can no longer change.`
            : asking === 'yank'
              ? `${r.version} will never be offered again, and download links already handed out stop working.`
              : 'The draft and its files are deleted.'
        }
        confirmLabel={asking === 'publish' ? 'Publish' : asking === 'yank' ? 'Yank' : 'Delete'}
        busy={act.isPending}
        error={act.error}
        onConfirm={() => asking && act.mutate(asking)}
        onClose={() => setAsking(null)}
      />
    </li>
  );
}

export function ReleasesTab({ app }: { app: App }) {
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['releases', app.id], queryFn: () => releasesApi.list(app.id) });
  const refresh = () => void qc.invalidateQueries({ queryKey: ['releases', app.id] });
  return (
    <div className="stack">
      <CreateRelease app={app} onCreated={refresh} />
      <section aria-labelledby="releases-title">
        <h2 id="releases-title">Releases</h2>
        {list.isPending && <Loading label="Loading releases" />}
        {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
        {list.data?.length === 0 && <EmptyState title="No releases yet" />}
        <ul className="product-list">
          {list.data?.map((r) => (
            <ReleaseCard key={r.id} r={r} onChanged={refresh} />
          ))}
        </ul>
      </section>
    </div>
  );
}
