// Application settings: every PATCH field of docs/protocol.md 11.1 (flags as switches, key_costs tiers,
// heartbeat_interval), the allowed binary hashes, secret rotation with a confirmation and deletion
// with a typed confirmation. Only changed fields are sent; a 422 shows next to its field; the update
// and webhook addresses are checked before sending; leaving with unsaved changes asks first.
import { useMemo, useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, type AppPatch } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { Button, Confirm, Field, FormError, Switch, fieldError } from '../components/ui.js';
import { KEY_COST_TIERS, type KeyCostTier } from '../lib/pricing.js';
import { plural } from '../lib/plural.js';
import { updateUrlProblem, webhookProblem } from '../lib/urls.js';
import { navigate, paths, useNavigationGuard } from '../router.js';
import { useNotice } from '../notices.js';
import { EntitlementsCard } from './EntitlementsCard.js';

const FLAGS = [
  ['enabled', 'Enabled', 'Master switch: when off every client call is refused.'],
  ['keys_paused', 'Pause all keys', 'Blocks key validation and logins.'],
  ['hwid_lock', 'HWID lock', 'Binds each key and account to the first device that uses it.'],
  [
    'require_signature',
    'Require request signatures',
    'Refuses client calls not signed with the api_secret (HMAC-SHA256).',
  ],
  ['injection_detection', 'Injection detection', 'A debugger reported on a heartbeat kills the session.'],
  ['require_heartbeat', 'Require heartbeat', 'Logins and activations need a live heartbeat session.'],
  ['force_update', 'Force update', "A client version other than this app's version is refused with 426."],
  ['force_encryption', 'Force encryption', 'init requires enc_key.'],
  ['hash_check', 'Binary hash check', 'init checks binary_hash against the allowed hashes.'],
  ['portal_enabled', 'Customer portal', 'Customers sign in at /portal/ to see their license and reset their device.'],
] as const satisfies readonly (readonly [keyof AppPatch & keyof App, string, string])[]; // a renamed API field fails tsc here
type Flag = (typeof FLAGS)[number][0];

const TEXTS = [
  'name',
  'description',
  'version',
  'disabled_message',
  'update_url',
  'update_message',
  'expected_binary_hash',
  'webhook',
] as const satisfies readonly (keyof AppPatch & keyof App)[];
type TextField = (typeof TEXTS)[number];

type Overflow = NonNullable<App['session_overflow']>;
/** The licensing models (docs/protocol.md 12): whole numbers, each with what it does. */
const NUMBERS = [
  [
    'max_devices',
    'Devices per key',
    'With HWID lock: machines one key (or account) may hold, 1-1000. A key may override it.',
  ],
  [
    'trial_hours',
    'Trial length (hours)',
    '0 = no trials. Otherwise clients may start one trial per machine, ever (0-8760).',
  ],
  ['trial_level', 'Trial level', 'Level of trial keys.'],
  [
    'offline_days',
    'Offline file validity (days)',
    '0 = off. How long a signed offline license file works without the service (0-3650).',
  ],
  [
    'grace_hours',
    'Grace period (hours)',
    '0 = off. How long SDKs keep a license valid while the service is unreachable (0-720).',
  ],
] as const satisfies readonly (readonly [keyof AppPatch & keyof App, string, string])[];
type NumberField = (typeof NUMBERS)[number][0];

interface FormState {
  flags: Record<Flag, boolean>;
  text: Record<TextField, string>;
  heartbeat: string;
  /** docs/protocol.md 12.2: max_sessions as typed, and session_overflow. */
  seats: string;
  overflow: Overflow;
  /** docs/releases.md: what an expired key may still receive. */
  expiredUpdates: 'none' | 'maintain';
  cooldown: string;
  numbers: Record<NumberField, string>;
  costs: Record<KeyCostTier, string>;
  hashes: string;
}

function initial(a: App): FormState {
  return {
    flags: Object.fromEntries(FLAGS.map(([f]) => [f, a[f]])) as Record<Flag, boolean>,
    text: Object.fromEntries(TEXTS.map((t) => [t, a[t] ?? ''])) as Record<TextField, string>,
    heartbeat: a.heartbeat_interval === null ? '' : String(a.heartbeat_interval),
    seats: String(a.max_sessions ?? 0),
    overflow: a.session_overflow ?? 'reject',
    expiredUpdates: a.expired_updates ?? 'none',
    cooldown: String(a.portal_reset_cooldown_hours),
    numbers: Object.fromEntries(NUMBERS.map(([n]) => [n, String(a[n])])) as Record<NumberField, string>,
    costs: Object.fromEntries(
      KEY_COST_TIERS.map((t) => [t, a.key_costs[t] == null ? '' : String(a.key_costs[t])]),
    ) as Record<KeyCostTier, string>,
    hashes: a.allowed_hashes.join('\n'),
  };
}

/** Numbers where the text is an integer, else the text itself (the server's 422 then names the field). */
const num = (s: string): number => (/^-?\d+$/.test(s.trim()) ? Number(s.trim()) : (s as unknown as number));

/** The PATCH body: only what differs from the stored application. */
export function settingsPatch(a: App, f: FormState): AppPatch {
  const patch: Record<string, unknown> = {};
  for (const [flag] of FLAGS) if (f.flags[flag] !== a[flag]) patch[flag] = f.flags[flag];
  for (const t of TEXTS) if (f.text[t] !== (a[t] ?? '')) patch[t] = f.text[t];
  const hb = f.heartbeat.trim();
  if (hb !== (a.heartbeat_interval === null ? '' : String(a.heartbeat_interval)) && hb !== '')
    patch.heartbeat_interval = num(hb);
  const seats = f.seats.trim();
  if (seats !== String(a.max_sessions ?? 0) && seats !== '') patch.max_sessions = num(seats);
  if (f.overflow !== (a.session_overflow ?? 'reject')) patch.session_overflow = f.overflow;
  if (f.expiredUpdates !== (a.expired_updates ?? 'none')) patch.expired_updates = f.expiredUpdates;
  const cd = f.cooldown.trim();
  if (cd !== String(a.portal_reset_cooldown_hours) && cd !== '') patch.portal_reset_cooldown_hours = num(cd);
  for (const [n] of NUMBERS) {
    const v = f.numbers[n].trim();
    if (v !== '' && v !== String(a[n])) patch[n] = num(v);
  }
  const costsChanged = KEY_COST_TIERS.some(
    (t) => f.costs[t].trim() !== (a.key_costs[t] == null ? '' : String(a.key_costs[t])),
  );
  if (costsChanged) {
    // key_costs replaces the whole map: every tier is sent, a blank one as null (absent).
    patch.key_costs = Object.fromEntries(
      KEY_COST_TIERS.map((t) => [t, f.costs[t].trim() === '' ? null : num(f.costs[t])]),
    );
  }
  return patch as AppPatch;
}

const hashList = (s: string) =>
  s
    .split(/[\s,]+/)
    .map((h) => h.trim())
    .filter(Boolean);

export function SettingsTab({ app }: { app: App }) {
  const qc = useQueryClient();
  const notice = useNotice();
  const [form, setForm] = useState<FormState>(() => initial(app));
  const [confirm, setConfirm] = useState<'rotate' | 'delete' | null>(null);
  const [local, setLocal] = useState<Partial<Record<TextField, string>>>({});
  const [leaving, setLeaving] = useState<(() => void) | null>(null);
  const patch = useMemo(() => settingsPatch(app, form), [app, form]);
  const hashesChanged = hashList(form.hashes).join('\n') !== app.allowed_hashes.join('\n');
  const dirty = Object.keys(patch).length > 0 || hashesChanged;
  useNavigationGuard(dirty, (proceed) => setLeaving(() => proceed));

  const submit = () => {
    save.reset(); // the last answer's errors belong to values that may have changed since
    const problems: Partial<Record<TextField, string>> = {};
    const u = updateUrlProblem(form.text.update_url);
    const w = webhookProblem(form.text.webhook);
    if (u && patch.update_url !== undefined) problems.update_url = u;
    if (w && patch.webhook !== undefined) problems.webhook = w;
    setLocal(problems);
    if (Object.keys(problems).length === 0) save.mutate();
  };

  const save = useMutation({
    mutationFn: async () => {
      let updated = app;
      if (Object.keys(patch).length > 0) updated = await appsApi.update(app.id, patch);
      if (hashesChanged) updated = await appsApi.setHashes(app.id, hashList(form.hashes));
      return updated;
    },
    onSuccess: (updated) => {
      qc.setQueryData(['app', app.id], updated);
      void qc.invalidateQueries({ queryKey: ['apps'] });
      setForm(initial(updated));
      setLocal({});
      notice('ok', 'Settings saved');
    },
  });
  const rotate = useMutation({
    mutationFn: () => appsApi.rotateSecret(app.id),
    onSuccess: (updated) => {
      qc.setQueryData(['app', app.id], updated);
      void qc.invalidateQueries({ queryKey: ['credentials', app.id] });
      setConfirm(null);
      notice('ok', 'New API secret generated: signatures made with the old one no longer verify');
    },
  });
  const remove = useMutation({
    mutationFn: () => appsApi.remove(app.id),
    onSuccess: () => {
      setConfirm(null);
      qc.removeQueries({ queryKey: ['app', app.id] });
      void qc.invalidateQueries({ queryKey: ['apps'] });
      notice('ok', `Application “${app.name}” deleted`);
      navigate(paths.apps(), true);
    },
  });

  const err = (f: string) => local[f as TextField] ?? fieldError(save.error, f);
  const text = (t: TextField, label: string, opts: { hint?: string; area?: boolean; placeholder?: string } = {}) => (
    <Field label={label} error={err(t)} hint={opts.hint} className={opts.area ? 'span-2' : undefined}>
      {(p) =>
        opts.area ? (
          <textarea
            {...p}
            name={t}
            rows={2}
            value={form.text[t]}
            onChange={(e) => setForm({ ...form, text: { ...form.text, [t]: e.target.value } })}
          />
        ) : (
          <input
            {...p}
            name={t}
            value={form.text[t]}
            placeholder={opts.placeholder}
            onChange={(e) => setForm({ ...form, text: { ...form.text, [t]: e.target.value } })}
          />
        )
      }
    </Field>
  );
  const flag = (f: Flag) => {
    const [, label, hint] = FLAGS.find(([k]) => k === f)!;
    return (
      <Switch
        label={label}
        hint={hint}
        checked={form.flags[f]}
        error={err(f)}
        onChange={(v) => setForm({ ...form, flags: { ...form.flags, [f]: v } })}
      />
    );
  };
  const shownFields = [
    ...TEXTS,
    ...FLAGS.map(([f]) => f),
    ...NUMBERS.map(([n]) => n),
    'heartbeat_interval',
    'max_sessions',
    'session_overflow',
    'expired_updates',
    'portal_reset_cooldown_hours',
    'key_costs',
    'hashes',
  ];
  const number = (n: NumberField) => {
    const [, label, hint] = NUMBERS.find(([k]) => k === n)!;
    return (
      <Field key={n} label={label} error={err(n)} hint={hint}>
        {(p) => (
          <input
            {...p}
            name={n}
            inputMode="numeric"
            value={form.numbers[n]}
            onChange={(e) => setForm({ ...form, numbers: { ...form.numbers, [n]: e.target.value } })}
          />
        )}
      </Field>
    );
  };

  return (
    <div className="settings">
      <form
        noValidate
        aria-label="Application settings"
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <fieldset className="card form-grid">
          <legend>General</legend>
          {text('name', 'Name')}
          {text('version', 'Version', {
            hint: 'Clients send it to init; a different one is logged, or refused with Force update.',
          })}
          {text('description', 'Description', { area: true, hint: 'Dashboard only; never sent to clients.' })}
        </fieldset>
        <fieldset className="card form-grid">
          <legend>Access</legend>
          {flag('enabled')}
          {flag('keys_paused')}
          {text('disabled_message', 'Disabled message', {
            area: true,
            hint: 'The 403 detail while the app is disabled (blank: “Application disabled”).',
          })}
          {flag('hwid_lock')}
        </fieldset>
        <fieldset className="card form-grid">
          <legend>Floating seats</legend>
          <Field
            label="Concurrent sessions per key"
            error={err('max_sessions')}
            hint="How many heartbeat sessions of one key (an end user's count against its key) may be alive at once; 0 = unlimited. A key may set its own in the generator."
          >
            {(p) => (
              <input
                {...p}
                name="max_sessions"
                inputMode="numeric"
                value={form.seats}
                placeholder="0"
                onChange={(e) => setForm({ ...form, seats: e.target.value })}
              />
            )}
          </Field>
          <Field
            label="When every seat is taken"
            error={err('session_overflow')}
            hint="Refuse: heartbeat/start answers 409 “Concurrent session limit reached”. Kick oldest: the session with the oldest last beat is ended (its next beat is rejected) and the new one starts."
          >
            {(p) => (
              <select
                {...p}
                name="session_overflow"
                value={form.overflow}
                onChange={(e) => setForm({ ...form, overflow: e.target.value as Overflow })}
              >
                <option value="reject">Refuse the new session</option>
                <option value="kick_oldest">Kick the oldest session</option>
              </select>
            )}
          </Field>
          <Field
            label="Updates after a key expires"
            error={err('expired_updates')}
            hint="None: an expired key gets no updates. Maintain: it keeps getting the releases published before it expired."
          >
            {(p) => (
              <select
                {...p}
                name="expired_updates"
                value={form.expiredUpdates}
                onChange={(e) => setForm({ ...form, expiredUpdates: e.target.value as 'none' | 'maintain' })}
              >
                <option value="none">None</option>
                <option value="maintain">Maintain what was released before</option>
              </select>
            )}
          </Field>
        </fieldset>
        <fieldset className="card form-grid">
          <legend>Customer portal</legend>
          {flag('portal_enabled')}
          <Field
            label="Hours between device resets"
            error={err('portal_reset_cooldown_hours')}
            hint="How long a customer waits after resetting its device before the next reset (0: no wait)."
          >
            {(p) => (
              <input
                {...p}
                name="portal_reset_cooldown_hours"
                inputMode="numeric"
                value={form.cooldown}
                placeholder="24"
                onChange={(e) => setForm({ ...form, cooldown: e.target.value })}
              />
            )}
          </Field>
        </fieldset>
        <fieldset className="card form-grid">
          <legend>Client security</legend>
          {flag('require_signature')}
          {flag('injection_detection')}
          {flag('require_heartbeat')}
          <Field
            label="Heartbeat interval (seconds)"
            error={err('heartbeat_interval')}
            hint={`Effective: ${app.beat_interval} s (clamped to 5-300).`}
          >
            {(p) => (
              <input
                {...p}
                name="heartbeat_interval"
                inputMode="numeric"
                value={form.heartbeat}
                placeholder="30"
                onChange={(e) => setForm({ ...form, heartbeat: e.target.value })}
              />
            )}
          </Field>
          {flag('force_encryption')}
          {flag('hash_check')}
          {text('expected_binary_hash', 'Expected binary hash', {
            hint: 'Optional pinned baseline for heartbeat integrity (hex).',
            placeholder: 'sha256 hex',
          })}
          <Field
            label="Allowed binary hashes"
            error={err('hashes')}
            hint="One SHA-256 or MD5 (hex) per line; checked at init when Binary hash check is on."
            className="span-2"
          >
            {(p) => (
              <textarea
                {...p}
                name="hashes"
                className="mono"
                rows={3}
                value={form.hashes}
                onChange={(e) => setForm({ ...form, hashes: e.target.value })}
              />
            )}
          </Field>
        </fieldset>
        <fieldset className="card form-grid">
          <legend>Licensing models</legend>
          {NUMBERS.map(([n]) => number(n))}
        </fieldset>
        <fieldset className="card form-grid">
          <legend>Updates</legend>
          {flag('force_update')}
          {text('update_url', 'Update URL', { placeholder: 'https://example.com/download' })}
          {text('update_message', 'Update message', { area: true, hint: 'Blank: “A new version is required.”' })}
        </fieldset>
        <fieldset className="card form-grid">
          <legend>Alerts</legend>
          {text('webhook', 'Webhook URL', {
            hint: "https URL for activation and new-device alerts (Discord URLs get an embed). Blank: the member's or your global webhook.",
            placeholder: 'https://',
          })}
        </fieldset>
        <fieldset className="card">
          <legend>Reseller key prices (credits per key)</legend>
          <div className="costs">
            {KEY_COST_TIERS.map((t) => (
              <Field
                key={t}
                label={t === 'lifetime' ? 'Lifetime' : plural(Number(t.slice(5)), 'day')}
                error={err(`key_costs.${t}`)}
              >
                {(p) => (
                  <input
                    {...p}
                    name={`cost-${t}`}
                    inputMode="numeric"
                    value={form.costs[t]}
                    placeholder="—"
                    onChange={(e) => setForm({ ...form, costs: { ...form.costs, [t]: e.target.value } })}
                  />
                )}
              </Field>
            ))}
          </div>
          {err('key_costs') && !KEY_COST_TIERS.some((t) => err(`key_costs.${t}`)) && (
            <div className="field-error" role="alert">
              {err('key_costs')}
            </div>
          )}
          <p className="hint">
            Other durations cost the 30-day price pro rata (at least 1); with no 30-day price, 1 credit per key.
          </p>
        </fieldset>
        <FormError error={save.error} fields={shownFields} />
        <div className={`actions${dirty ? ' sticky-actions' : ''}`}>
          <Button
            onClick={() => {
              setForm(initial(app));
              setLocal({});
              save.reset();
            }}
            disabled={!dirty}
          >
            Discard changes
          </Button>
          <Button type="submit" variant="primary" busy={save.isPending} busyLabel="Saving" disabled={!dirty}>
            Save settings
          </Button>
        </div>
      </form>

      <EntitlementsCard appId={app.id} />

      <section className="card danger-zone" aria-labelledby="danger-title">
        <h2 id="danger-title">Danger zone</h2>
        <div className="danger-row">
          <div>
            <strong>Rotate API secret</strong>
            <p className="muted small">Signed clients must be updated with the new secret.</p>
          </div>
          <Button variant="danger" onClick={() => setConfirm('rotate')}>
            Rotate secret
          </Button>
        </div>
        <div className="danger-row">
          <div>
            <strong>Delete application</strong>
            <p className="muted small">Removes every key, user, log and blacklist entry. Irreversible.</p>
          </div>
          <Button variant="danger" onClick={() => setConfirm('delete')}>
            Delete application
          </Button>
        </div>
      </section>
      <Confirm
        open={leaving !== null}
        title="Leave without saving?"
        confirmLabel="Discard changes"
        cancelLabel="Keep editing"
        message="Your changes to this application's settings have not been saved."
        onConfirm={() => {
          const go = leaving;
          setLeaving(null);
          setForm(initial(app));
          go?.();
        }}
        onClose={() => setLeaving(null)}
      />
      <Confirm
        open={confirm === 'rotate'}
        title="Rotate the API secret?"
        confirmLabel="Rotate secret"
        busy={rotate.isPending}
        error={rotate.error}
        message="Signatures made with the current secret stop verifying immediately."
        onConfirm={() => rotate.mutate()}
        onClose={() => {
          setConfirm(null);
          rotate.reset();
        }}
      />
      <Confirm
        open={confirm === 'delete'}
        title={`Delete “${app.name}”?`}
        confirmLabel="Delete application"
        typed={app.name}
        busy={remove.isPending}
        error={remove.error}
        message="Every key, user, log entry and blacklist entry of this application is removed, and its clients stop working."
        onConfirm={() => remove.mutate()}
        onClose={() => {
          setConfirm(null);
          remove.reset();
        }}
      />
    </div>
  );
}
