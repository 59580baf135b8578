// The team: the member tree of the caller's subtree, creating members (role, apps, the eleven
// permissions, credits, notes) and managing one (role, enabled, email, permissions, apps, credits,
// subscription, password, webhook, delete with the number of adopted children).
import { useMemo, useState, type ReactNode } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, team as teamApi, type SubscriptionInput, type TeamCreate } from '../api/endpoints.js';
import type { Account, App } from '../api/responses.js';
import {
  Badge,
  Button,
  Confirm,
  Dialog,
  EmptyState,
  ErrorState,
  Field,
  FormError,
  Loading,
  Switch,
  Time,
  fieldError,
} from '../components/ui.js';
import { PERMISSION_KEYS, PERMISSION_LABELS, type PermissionKey, type Permissions } from '../lib/permissions.js';
import { useTitle } from '../hooks/useTitle.js';
import { plural } from '../lib/plural.js';
import { webhookProblem } from '../lib/urls.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';

interface TreeNode {
  member: Account;
  children: TreeNode[];
}

/** Members arranged under their parents; members whose parent is not listed (the caller's children) are roots. */
export function memberTree(members: readonly Account[]): TreeNode[] {
  const nodes = new Map(members.map((m) => [m.id, { member: m, children: [] as TreeNode[] }]));
  const roots: TreeNode[] = [];
  for (const n of nodes.values()) {
    const parent = n.member.parent_id ? nodes.get(n.member.parent_id) : undefined;
    (parent ? parent.children : roots).push(n);
  }
  const sort = (l: TreeNode[]) => {
    l.sort((a, b) => a.member.username.localeCompare(b.member.username));
    l.forEach((n) => sort(n.children));
  };
  sort(roots);
  return roots;
}

const roleTone = (r: string) =>
  (r === 'admin' ? 'blue' : r === 'developer' ? 'amber' : 'grey') as 'blue' | 'amber' | 'grey';

export function TeamView() {
  const { caller } = useSession();
  const list = useQuery({ queryKey: ['team'], queryFn: teamApi.list });
  const apps = useQuery({ queryKey: ['apps'], queryFn: appsApi.list });
  const [creating, setCreating] = useState(false);
  const [selectedId, setSelectedId] = useState<string | null>(null);
  const tree = useMemo(() => memberTree(list.data ?? []), [list.data]);
  // The open member as listed now; after a delete it is gone from the list but its dialog stays to report the result.
  const [lastSelected, setLastSelected] = useState<Account | null>(null);
  const listed = list.data?.find((m) => m.id === selectedId);
  if (listed && listed !== lastSelected) setLastSelected(listed);
  const selected = selectedId ? (listed ?? lastSelected) : null;
  useTitle('Team');

  if (caller.role === 'reseller') return <EmptyState title="Team management is for owners and admins" />;
  return (
    <section aria-labelledby="team-title">
      <div className="page-head">
        <h1 id="team-title">Team</h1>
      </div>
      <div className="toolbar">
        {!creating && (
          <Button variant="primary" onClick={() => setCreating(true)}>
            New member
          </Button>
        )}
      </div>
      {creating && <CreateMember apps={apps.data ?? []} onDone={() => setCreating(false)} />}
      {list.isPending && <Loading label="Loading team" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && list.data.length === 0 && (
        <EmptyState title="No members yet">
          Create admins (owners only) and resellers with their own permissions and credits.
        </EmptyState>
      )}
      {tree.length > 0 && (
        <ul className="tree" aria-label="Team members" data-testid="team-tree">
          {tree.map((n) => (
            <MemberNode key={n.member.id} node={n} onOpen={setSelectedId} />
          ))}
        </ul>
      )}
      {selected && (
        <MemberDialog key={selected.id} member={selected} apps={apps.data ?? []} onClose={() => setSelectedId(null)} />
      )}
    </section>
  );
}

function MemberNode({ node, onOpen }: { node: TreeNode; onOpen: (id: string) => void }) {
  const m = node.member;
  return (
    <li>
      <div className="member-row">
        <button type="button" className="linklike" onClick={() => onOpen(m.id)} aria-label={`Manage ${m.username}`}>
          {m.username}
        </button>
        {m.display_name && <span className="muted">{m.display_name}</span>}
        <Badge tone={roleTone(m.role)}>{m.role}</Badge>
        {!m.enabled && <Badge tone="red">disabled</Badge>}
        {m.two_factor ? <Badge tone="green">2FA on</Badge> : <Badge tone="grey">no 2FA</Badge>}
        {m.role === 'reseller' && (
          <span className="muted small">{m.credits == null ? 'unlimited credits' : plural(m.credits, 'credit')}</span>
        )}
        <span className="muted small">{plural(m.allowed_apps.length, 'app')}</span>
        {m.subscription_expires_at && (
          <span className="muted small">
            subscription until <Time iso={m.subscription_expires_at} />
          </span>
        )}
      </div>
      {node.children.length > 0 && (
        <ul>
          {node.children.map((c) => (
            <MemberNode key={c.member.id} node={c} onOpen={onOpen} />
          ))}
        </ul>
      )}
    </li>
  );
}

function PermissionMatrix({
  value,
  onChange,
  legend = 'Permissions',
}: {
  value: Permissions;
  onChange: (p: Permissions) => void;
  legend?: string;
}) {
  return (
    <fieldset className="matrix">
      <legend>{legend}</legend>
      {PERMISSION_KEYS.map((k: PermissionKey) => (
        <label key={k} className="check">
          <input
            type="checkbox"
            name={`perm-${k}`}
            checked={value[k] === true}
            onChange={(e) => onChange({ ...value, [k]: e.target.checked })}
          />
          {PERMISSION_LABELS[k]}
        </label>
      ))}
    </fieldset>
  );
}

function AppChoice({
  apps,
  value,
  onChange,
  error,
}: {
  apps: App[];
  value: string[];
  onChange: (ids: string[]) => void;
  error?: string | undefined;
}) {
  return (
    <fieldset className={`app-choice${error ? ' field-invalid' : ''}`}>
      <legend>Applications</legend>
      {apps.length === 0 && <span className="muted">No applications yet.</span>}
      {apps.map((a) => (
        <label key={a.id} className="check">
          <input
            type="checkbox"
            checked={value.includes(a.id)}
            onChange={(e) => onChange(e.target.checked ? [...value, a.id] : value.filter((x) => x !== a.id))}
          />
          {a.name}
        </label>
      ))}
      {error && (
        <div className="field-error" role="alert">
          {error}
        </div>
      )}
    </fieldset>
  );
}

const intOrText = (s: string): number => (/^-?\d+$/.test(s.trim()) ? Number(s.trim()) : (s as unknown as number));

function CreateMember({ apps, onDone }: { apps: App[]; onDone: (m: Account | null) => void }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [f, setF] = useState({
    username: '',
    display_name: '',
    password: '',
    role: 'reseller' as 'reseller' | 'admin',
    email: '',
    credits: '0',
    notes: '',
  });
  const [allowed, setAllowed] = useState<string[]>([]);
  const [perms, setPerms] = useState<Permissions>({});
  const create = useMutation({
    mutationFn: () => {
      const body: TeamCreate = {
        username: f.username,
        password: f.password,
        role: f.role,
        allowed_apps: allowed,
        ...(f.display_name ? { display_name: f.display_name } : {}),
        ...(f.email ? { email: f.email } : {}),
        ...(f.role === 'reseller'
          ? { key_quota: intOrText(f.credits || '0'), notes: f.notes, permissions: perms }
          : {}),
      };
      return teamApi.create(body);
    },
    onSuccess: (m) => {
      notice('ok', `${m.username} created`);
      void qc.invalidateQueries({ queryKey: ['team'] });
      onDone(m);
    },
  });
  const err = (k: string) => fieldError(create.error, k);
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });
  const canAdmin = caller.role === 'owner' || caller.role === 'developer';
  return (
    <form
      noValidate
      className="card form-grid"
      aria-label="New team member"
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <h2 className="span-2">New member</h2>
      <Field label="Username" error={err('username')} hint="3-32 letters, digits, _ or -">
        {(p) => (
          <input {...p} name="username" autoComplete="off" value={f.username} onChange={set('username')} autoFocus />
        )}
      </Field>
      <Field label="Display name" error={err('display_name')}>
        {(p) => <input {...p} name="display_name" value={f.display_name} onChange={set('display_name')} />}
      </Field>
      <Field label="Password" error={err('password')} hint="At least 8 characters, a letter and a non-letter">
        {(p) => (
          <input
            {...p}
            name="password"
            type="password"
            autoComplete="new-password"
            value={f.password}
            onChange={set('password')}
          />
        )}
      </Field>
      <Field label="Email (optional)" error={err('email')}>
        {(p) => <input {...p} name="email" type="email" value={f.email} onChange={set('email')} />}
      </Field>
      <Field label="Role" error={err('role')}>
        {(p) => (
          <select
            {...p}
            name="role"
            value={f.role}
            onChange={(e) => setF({ ...f, role: e.target.value as 'reseller' | 'admin' })}
          >
            <option value="reseller">Reseller</option>
            {canAdmin && <option value="admin">Admin</option>}
          </select>
        )}
      </Field>
      {f.role === 'reseller' && (
        <Field label="Credits" error={err('key_quota')} hint="0 means unlimited">
          {(p) => <input {...p} name="credits" inputMode="numeric" value={f.credits} onChange={set('credits')} />}
        </Field>
      )}
      <div className="span-2">
        <AppChoice apps={apps} value={allowed} onChange={setAllowed} error={err('allowed_apps')} />
      </div>
      {f.role === 'reseller' && (
        <>
          <div className="span-2">
            <PermissionMatrix value={perms} onChange={setPerms} />
          </div>
          {err('permissions') && (
            <div className="field-error span-2" role="alert">
              {err('permissions')}
            </div>
          )}
          <Field label="Notes" error={err('notes')} hint="At most 500 characters" className="span-2">
            {(p) => <textarea {...p} name="notes" rows={2} value={f.notes} onChange={set('notes')} />}
          </Field>
        </>
      )}
      <FormError
        error={create.error}
        fields={[
          'username',
          'display_name',
          'password',
          'email',
          'role',
          'key_quota',
          'allowed_apps',
          'permissions',
          'notes',
        ]}
      />
      <div className="actions span-2">
        <Button onClick={() => onDone(null)}>Cancel</Button>
        <Button type="submit" variant="primary" busy={create.isPending} busyLabel="Creating">
          Create member
        </Button>
      </div>
    </form>
  );
}

function Section({ title, children }: { title: string; children: ReactNode }) {
  return (
    <section className="member-section">
      <h3>{title}</h3>
      {children}
    </section>
  );
}

function MemberDialog({ member, apps, onClose }: { member: Account; apps: App[]; onClose: () => void }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const done = (msg: string) => () => {
    notice('ok', msg);
    void qc.invalidateQueries({ queryKey: ['team'] });
  };
  const [profile, setProfile] = useState({ role: member.role, enabled: member.enabled, email: member.email ?? '' });
  const [perms, setPerms] = useState<Permissions>(member.permissions ?? {});
  const [allowed, setAllowed] = useState<string[]>(member.allowed_apps);
  const [credits, setCredits] = useState('');
  const [password, setPassword] = useState('');
  const [webhook, setWebhook] = useState(member.webhook ?? '');
  const [sub, setSub] = useState<{ mode: 'extend_days' | 'expires_at' | 'clear'; value: string }>({
    mode: 'extend_days',
    value: '30',
  });
  const [deleting, setDeleting] = useState(false);
  const [resetting, setResetting] = useState(false);
  const [adopted, setAdopted] = useState<number | null>(null);

  const saveProfile = useMutation({
    mutationFn: () => {
      const body: Record<string, unknown> = {};
      if (profile.role !== member.role) body.role = profile.role;
      if (profile.enabled !== member.enabled) body.enabled = profile.enabled;
      if (profile.email !== (member.email ?? '')) body.email = profile.email;
      return teamApi.update(member.id, body);
    },
    onSuccess: done('Member updated'),
  });
  const savePerms = useMutation({
    mutationFn: () => teamApi.setPermissions(member.id, perms),
    onSuccess: done('Permissions saved'),
  });
  const saveApps = useMutation({
    mutationFn: () => teamApi.setApps(member.id, allowed),
    onSuccess: done('Applications saved'),
  });
  const topUp = useMutation({
    mutationFn: () => teamApi.addCredits(member.id, intOrText(credits)),
    onSuccess: () => {
      setCredits('');
      done('Credits changed')();
    },
  });
  const savePassword = useMutation({
    mutationFn: () => teamApi.setPassword(member.id, password),
    onSuccess: () => {
      setPassword('');
      done('Password set; their sessions were signed out')();
    },
  });
  const [webhookLocal, setWebhookLocal] = useState<string | undefined>(undefined);
  const saveWebhook = useMutation({
    mutationFn: () => teamApi.setWebhook(member.id, webhook),
    onSuccess: done('Webhook saved'),
  });
  const saveSub = useMutation({
    mutationFn: () => {
      const body: SubscriptionInput =
        sub.mode === 'clear'
          ? { clear: true }
          : sub.mode === 'extend_days'
            ? { extend_days: intOrText(sub.value) }
            : { expires_at: sub.value };
      return teamApi.setSubscription(member.id, body);
    },
    onSuccess: done('Subscription changed'),
  });
  const resetTwoFactor = useMutation({
    mutationFn: () => teamApi.resetTwoFactor(member.id),
    onSuccess: () => {
      setResetting(false);
      done('Two-factor sign-in reset; their sessions were signed out')();
    },
  });
  const remove = useMutation({
    mutationFn: () => teamApi.remove(member.id),
    onSuccess: (r) => {
      setDeleting(false);
      setAdopted(r.adopted_children);
      void qc.invalidateQueries({ queryKey: ['team'] });
    },
  });

  const profileChanged =
    profile.role !== member.role || profile.enabled !== member.enabled || profile.email !== (member.email ?? '');
  const ownerOrDev = caller.role === 'owner' || caller.role === 'developer';

  if (adopted !== null) {
    return (
      <Dialog open title={`${member.username} deleted`} onClose={onClose}>
        <p role="status">
          {member.username} was deleted.{' '}
          {adopted === 0
            ? 'They had no team members of their own.'
            : `${plural(adopted, 'member')} of theirs moved under you.`}
        </p>
        <div className="actions">
          <Button variant="primary" onClick={onClose}>
            Close
          </Button>
        </div>
      </Dialog>
    );
  }
  return (
    <Dialog open title={`Manage ${member.username}`} onClose={onClose} wide>
      <p className="muted">
        <Badge tone={roleTone(member.role)}>{member.role}</Badge> created <Time iso={member.created_at} />
        {member.role === 'reseller' && (
          <> · {member.credits == null ? 'unlimited credits' : plural(member.credits, 'credit')}</>
        )}
      </p>
      <Section title="Profile">
        <form
          noValidate
          className="form-grid"
          onSubmit={(e) => {
            e.preventDefault();
            saveProfile.mutate();
          }}
        >
          {ownerOrDev && (member.role === 'admin' || member.role === 'reseller') && (
            <Field label="Role" error={fieldError(saveProfile.error, 'role')}>
              {(p) => (
                <select
                  {...p}
                  value={profile.role}
                  onChange={(e) => setProfile({ ...profile, role: e.target.value as 'admin' })}
                >
                  <option value="reseller">Reseller</option>
                  <option value="admin">Admin</option>
                </select>
              )}
            </Field>
          )}
          <Field label="Email" error={fieldError(saveProfile.error, 'email')}>
            {(p) => (
              <input
                {...p}
                type="email"
                value={profile.email}
                onChange={(e) => setProfile({ ...profile, email: e.target.value })}
              />
            )}
          </Field>
          <Switch
            label="Enabled"
            checked={profile.enabled}
            onChange={(v) => setProfile({ ...profile, enabled: v })}
            error={fieldError(saveProfile.error, 'enabled')}
            hint="A disabled member is signed out and cannot sign in."
          />
          <FormError error={saveProfile.error} fields={['role', 'email', 'enabled']} />
          <div className="actions span-2">
            <Button type="submit" busy={saveProfile.isPending} busyLabel="Saving" disabled={!profileChanged}>
              Save profile
            </Button>
          </div>
        </form>
      </Section>
      {member.role === 'reseller' && (
        <Section title="Permissions">
          <form
            noValidate
            onSubmit={(e) => {
              e.preventDefault();
              savePerms.mutate();
            }}
          >
            <PermissionMatrix value={perms} onChange={setPerms} legend="Allowed actions" />
            <FormError error={savePerms.error} />
            <div className="actions">
              <Button type="submit" busy={savePerms.isPending} busyLabel="Saving">
                Save permissions
              </Button>
            </div>
          </form>
        </Section>
      )}
      <Section title="Applications">
        <form
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            saveApps.mutate();
          }}
        >
          <AppChoice
            apps={apps}
            value={allowed}
            onChange={setAllowed}
            error={fieldError(saveApps.error, 'allowed_apps')}
          />
          <FormError error={saveApps.error} fields={['allowed_apps']} />
          <div className="actions">
            <Button type="submit" busy={saveApps.isPending} busyLabel="Saving">
              Save applications
            </Button>
          </div>
        </form>
      </Section>
      {member.role === 'reseller' && (
        <Section title="Credits">
          <form
            noValidate
            className="form-inline"
            onSubmit={(e) => {
              e.preventDefault();
              topUp.mutate();
            }}
          >
            <Field label="Add (negative removes)" error={fieldError(topUp.error, 'amount')}>
              {(p) => (
                <input
                  {...p}
                  name="amount"
                  inputMode="numeric"
                  value={credits}
                  onChange={(e) => setCredits(e.target.value)}
                  placeholder="100"
                />
              )}
            </Field>
            <Button type="submit" busy={topUp.isPending} busyLabel="Saving">
              Apply
            </Button>
            <FormError error={topUp.error} fields={['amount']} />
          </form>
        </Section>
      )}
      {member.role === 'admin' && ownerOrDev && (
        <Section title="Subscription">
          <p className="muted small">
            {member.subscription_expires_at ? (
              <>
                Ends <Time iso={member.subscription_expires_at} />
              </>
            ) : (
              'Unlimited'
            )}
          </p>
          <form
            noValidate
            className="form-inline"
            onSubmit={(e) => {
              e.preventDefault();
              saveSub.mutate();
            }}
          >
            <Field label="Change">
              {(p) => (
                <select
                  {...p}
                  value={sub.mode}
                  onChange={(e) =>
                    setSub({ mode: e.target.value as 'clear', value: e.target.value === 'extend_days' ? '30' : '' })
                  }
                >
                  <option value="extend_days">Extend by days</option>
                  <option value="expires_at">End on a date</option>
                  <option value="clear">Make unlimited</option>
                </select>
              )}
            </Field>
            {sub.mode !== 'clear' && (
              <Field label={sub.mode === 'extend_days' ? 'Days' : 'Date'} error={fieldError(saveSub.error, sub.mode)}>
                {(p) => (
                  <input
                    {...p}
                    type={sub.mode === 'expires_at' ? 'date' : 'text'}
                    inputMode={sub.mode === 'extend_days' ? 'numeric' : undefined}
                    value={sub.value}
                    onChange={(e) => setSub({ ...sub, value: e.target.value })}
                  />
                )}
              </Field>
            )}
            <Button type="submit" busy={saveSub.isPending} busyLabel="Saving">
              Apply
            </Button>
            <FormError error={saveSub.error} fields={['extend_days', 'expires_at', 'clear']} />
          </form>
        </Section>
      )}
      <Section title="Password">
        <form
          noValidate
          className="form-inline"
          onSubmit={(e) => {
            e.preventDefault();
            savePassword.mutate();
          }}
        >
          <Field label="New password" error={fieldError(savePassword.error, 'password')}>
            {(p) => (
              <input
                {...p}
                type="password"
                autoComplete="new-password"
                value={password}
                onChange={(e) => setPassword(e.target.value)}
              />
            )}
          </Field>
          <Button type="submit" busy={savePassword.isPending} busyLabel="Saving">
            Set password
          </Button>
          <FormError error={savePassword.error} fields={['password']} />
        </form>
      </Section>
      <Section title="Default webhook">
        <form
          noValidate
          className="form-inline"
          onSubmit={(e) => {
            e.preventDefault();
            const problem = webhookProblem(webhook);
            setWebhookLocal(problem);
            if (!problem) saveWebhook.mutate();
          }}
        >
          <Field
            label="Webhook URL"
            error={webhookLocal ?? fieldError(saveWebhook.error, 'webhook')}
            className="grow"
            hint="Alerts for keys this member generated, when the app has no webhook. Blank clears."
          >
            {(p) => (
              <input {...p} value={webhook} onChange={(e) => setWebhook(e.target.value)} placeholder="https://" />
            )}
          </Field>
          <Button type="submit" busy={saveWebhook.isPending} busyLabel="Saving">
            Save webhook
          </Button>
          <FormError error={saveWebhook.error} fields={['webhook']} />
        </form>
      </Section>
      <Section title="Two-factor sign-in">
        <p className="muted small">
          {member.two_factor ? (
            <>
              <Badge tone="green">on</Badge> {member.username} signs in with a code from an authenticator app.
            </>
          ) : (
            <>
              <Badge tone="grey">off</Badge> {member.username} signs in with a password only.
            </>
          )}
        </p>
        {ownerOrDev && member.two_factor && (
          <Button variant="danger" onClick={() => setResetting(true)}>
            Reset two-factor
          </Button>
        )}
      </Section>
      <Confirm
        open={resetting}
        title={`Reset ${member.username}'s two-factor sign-in?`}
        message="For a lost phone: their second factor and recovery codes are removed and their sessions end. They sign in with their password and can set up a new one."
        confirmLabel="Reset two-factor"
        busy={resetTwoFactor.isPending}
        error={resetTwoFactor.error}
        onConfirm={() => resetTwoFactor.mutate()}
        onClose={() => {
          setResetting(false);
          resetTwoFactor.reset();
        }}
      />
      <Section title="Delete">
        <p className="muted small">Their own members move under you; keys they generated stay.</p>
        <Button variant="danger" onClick={() => setDeleting(true)}>
          Delete {member.username}
        </Button>
      </Section>
      <Confirm
        open={deleting}
        title={`Delete ${member.username}?`}
        message="Their sessions end at once."
        confirmLabel="Delete member"
        typed={member.username}
        busy={remove.isPending}
        error={remove.error}
        onConfirm={() => remove.mutate()}
        onClose={() => {
          setDeleting(false);
          remove.reset();
        }}
      />
    </Dialog>
  );
}
