// Application cards, and creating one (owners, admins, developers; resellers cannot create apps).
import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi } from '../api/endpoints.js';
import { Badge, Button, EmptyState, ErrorState, Field, FormError, Loading, fieldError } from '../components/ui.js';
import { isManager } from '../lib/permissions.js';
import { Link, navigate, paths } from '../router.js';
import { useTitle } from '../hooks/useTitle.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';

export function AppsView() {
  const { caller } = useSession();
  const list = useQuery({ queryKey: ['apps'], queryFn: appsApi.list });
  useTitle('Applications');
  return (
    <section aria-labelledby="apps-title">
      <div className="page-head">
        <h1 id="apps-title">Applications</h1>
      </div>
      {isManager(caller) && <CreateApp />}
      {list.isPending && <Loading label="Loading applications" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && list.data.length === 0 && (
        <EmptyState title="No applications yet">
          {isManager(caller) ? 'Create one above: it gets its own keys, users, logs and credentials.' : 'No application is assigned to you yet. Ask the account that created you.'}
        </EmptyState>
      )}
      {list.data && list.data.length > 0 && (
        <ul className="cards" aria-label="Applications">
          {list.data.map((a) => (
            <li key={a.id} className="card app-card">
              <h2><Link to={paths.app(a.id)}>{a.name}</Link></h2>
              <div className="badges">
                <Badge tone="blue">v{a.version}</Badge>
                {a.enabled ? <Badge tone="green">Enabled</Badge> : <Badge tone="red">Disabled</Badge>}
                {a.keys_paused && <Badge tone="amber">Keys paused</Badge>}
              </div>
              {a.description && <p className="muted clamp">{a.description}</p>}
              {a.stats && (
                <dl className="mini-stats">
                  <div><dt>Keys</dt><dd>{a.stats.keys}</dd></div>
                  <div><dt>Users</dt><dd>{a.stats.users}</dd></div>
                </dl>
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function CreateApp() {
  const qc = useQueryClient();
  const notice = useNotice();
  const [open, setOpen] = useState(false);
  const [name, setName] = useState('');
  const [version, setVersion] = useState('1.0');
  const [description, setDescription] = useState('');
  const create = useMutation({
    mutationFn: () => appsApi.create({ name, version, ...(description ? { description } : {}) }),
    onSuccess: (app) => {
      void qc.invalidateQueries({ queryKey: ['apps'] });
      notice('ok', `Application “${app.name}” created`);
      navigate(paths.app(app.id, 'integration'));
    },
  });
  if (!open) return <div className="toolbar"><Button variant="primary" onClick={() => setOpen(true)}>New application</Button></div>;
  return (
    <form noValidate className="card form-grid" aria-label="New application" onSubmit={(e) => { e.preventDefault(); create.mutate(); }}>
      <Field label="Name" error={fieldError(create.error, 'name')}>
        {(p) => <input {...p} name="name" value={name} onChange={(e) => setName(e.target.value)} required autoFocus />}
      </Field>
      <Field label="Version" error={fieldError(create.error, 'version')} hint="Clients send it to init.">
        {(p) => <input {...p} name="version" value={version} onChange={(e) => setVersion(e.target.value)} />}
      </Field>
      <Field label="Description" error={fieldError(create.error, 'description')} className="span-2">
        {(p) => <textarea {...p} name="description" rows={2} value={description} onChange={(e) => setDescription(e.target.value)} />}
      </Field>
      <FormError error={create.error} fields={['name', 'version', 'description']} />
      <div className="actions span-2">
        <Button onClick={() => setOpen(false)}>Cancel</Button>
        <Button type="submit" variant="primary" busy={create.isPending} busyLabel="Creating">Create application</Button>
      </div>
    </form>
  );
}
