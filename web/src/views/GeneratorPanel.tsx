// The key generator (docs/spec.md "Key generation" rules 1-6): mask, character classes, amount, duration and
// unit, level, note; a reseller sees the price (rule 4) and a batch over the balance is refused
// before anything is sent (rule 5). The plaintext keys are shown once, with copy and download, and
// the last five batches stay in sessionStorage for this browser session only. A batch that takes
// over 1 % of the keys its mask can produce is confirmed first.
import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, licenses as licensesApi, type GenerateInput } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { Button, Confirm, CopyButton, Dialog, Field, FormError, Time, fieldError } from '../components/ui.js';
import {
  alphabetFor,
  CHARACTER_CLASSES,
  crowdedKeySpace,
  DEFAULT_MASK,
  generatorProblems,
  MAX_BATCH,
  MIN_RANDOM_CHARS,
  placeholderCount,
  weakMask,
  type CharacterClass,
  type ClassChoice,
} from '../lib/generator.js';
import { formatCount, plural } from '../lib/plural.js';
import { keysCsv, keysTxt, saveFile } from '../lib/download.js';
import { readBatches, rememberBatch, type Batch } from '../lib/history.js';
import { quote, type DurationUnit, type KeyCosts } from '../lib/pricing.js';
import { useSession } from '../session.js';
import { EntitlementPicks } from '../components/EntitlementPicks.js';
import { useNotice } from '../notices.js';

const UNITS: DurationUnit[] = ['hours', 'days', 'weeks', 'months', 'lifetime'];

export function GeneratorPanel({ app, onClose }: { app: App; onClose: () => void }) {
  const { account, caller, refresh } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [mask, setMask] = useState(DEFAULT_MASK);
  const [classes, setClasses] = useState<ClassChoice>({ upper: true, lower: false, digits: true });
  const [amount, setAmount] = useState('10');
  const [duration, setDuration] = useState('30');
  const [unit, setUnit] = useState<DurationUnit>('days');
  const [level, setLevel] = useState('1');
  const [note, setNote] = useState('');
  /** docs/protocol.md 12.2: the keys' own max_sessions; blank: the application's. */
  const [seats, setSeats] = useState('');
  const [maxDevices, setMaxDevices] = useState('');
  const [codes, setCodes] = useState<string[]>([]);
  const catalogue = useQuery({ queryKey: ['entitlements', app.id], queryFn: () => appsApi.entitlements(app.id) });
  const [local, setLocal] = useState<{ field: string; msg: string }[]>([]);
  const [shown, setShown] = useState<Batch | null>(null);
  const [history, setHistory] = useState<Batch[]>(() => readBatches());
  const [crowded, setCrowded] = useState<{ body: GenerateInput; space: number; share: number } | null>(null);

  const amountN = Number(amount);
  const durationN = unit === 'lifetime' ? 0 : Number(duration);
  const reseller = caller.role === 'reseller';
  const price =
    reseller &&
    Number.isInteger(amountN) &&
    amountN > 0 &&
    (unit === 'lifetime' || (Number.isInteger(durationN) && durationN > 0))
      ? quote({
          amount: amountN,
          duration: durationN,
          unit,
          costs: app.key_costs as KeyCosts,
          balance: account.credits ?? null,
        })
      : null;

  const generate = useMutation({
    mutationFn: (body: GenerateInput) => licensesApi.generate(app.id, body),
    onSuccess: (created) => {
      const batch: Batch = {
        id: `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`,
        at: new Date().toISOString(),
        app_id: app.id,
        app_name: app.name,
        keys: created.map((k) => ({
          id: k.id,
          key: k.key,
          level: k.level,
          duration_value: k.duration_value,
          duration_unit: k.duration_unit,
          note: k.note ?? '',
        })),
      };
      setHistory(rememberBatch(batch));
      setShown(batch);
      notice('ok', `${plural(created.length, 'key')} generated`);
      void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
      void qc.invalidateQueries({ queryKey: ['stats', app.id] });
      if (reseller) refresh(); // the balance changed
    },
  });

  const submit = () => {
    const problems = generatorProblems({ mask, classes, amount: amountN });
    setLocal(problems);
    if (problems.length > 0) return;
    if (price?.refused) return; // rule 5: refused here, nothing is sent
    const body: GenerateInput = {
      amount: amountN,
      unit,
      mask,
      alphabet: alphabetFor(classes),
      level: Number(level),
      ...(unit === 'lifetime' ? {} : { duration: Number(duration) }),
      ...(note ? { note } : {}),
      ...(seats.trim() !== '' ? { max_sessions: /^\d+$/.test(seats.trim()) ? Number(seats.trim()) : NaN } : {}),
      ...(maxDevices.trim() ? { max_devices: Number(maxDevices) } : {}),
      ...(codes.length > 0 ? { entitlements: codes } : {}),
    };
    const c = crowdedKeySpace(mask, body.alphabet?.length ?? 0, amountN);
    if (c) setCrowded({ body, ...c });
    else generate.mutate(body);
  };
  const err = (f: string) => local.find((p) => p.field === f)?.msg ?? fieldError(generate.error, f);

  return (
    <section className="card generator" aria-labelledby="gen-title">
      <div className="section-head">
        <h2 id="gen-title">Generate keys</h2>
        <Button variant="ghost" onClick={onClose}>
          Close
        </Button>
      </div>
      <form
        noValidate
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <Field
          label="Mask"
          error={err('mask')}
          className="span-2"
          hint={
            <>
              Each <code>*</code>, <code>#</code> or <code>X</code> becomes a random character; everything else is
              copied. {placeholderCount(mask)} random characters.
              {weakMask(mask) && (
                <strong className="warn">
                  {' '}
                  Weak: fewer than {MIN_RANDOM_CHARS} random characters are easy to guess.
                </strong>
              )}
            </>
          }
        >
          {(p) => (
            <input
              {...p}
              name="mask"
              className="mono"
              value={mask}
              onChange={(e) => setMask(e.target.value)}
              spellCheck={false}
            />
          )}
        </Field>
        <fieldset
          className={`span-2 classes${err('alphabet') ? ' field-invalid' : ''}`}
          aria-describedby={err('alphabet') ? 'gen-classes-error' : undefined}
        >
          <legend>Characters</legend>
          {(Object.keys(CHARACTER_CLASSES) as CharacterClass[]).map((c) => (
            <label key={c} className="check">
              <input
                type="checkbox"
                name={`class-${c}`}
                checked={classes[c]}
                onChange={(e) => setClasses({ ...classes, [c]: e.target.checked })}
              />
              {CHARACTER_CLASSES[c].label}
            </label>
          ))}
          {err('alphabet') && (
            <div className="field-error" id="gen-classes-error" role="alert">
              {err('alphabet')}
            </div>
          )}
        </fieldset>
        <Field label="Amount" error={err('amount')} hint={`1 to ${MAX_BATCH}`}>
          {(p) => (
            <input
              {...p}
              name="amount"
              type="number"
              inputMode="numeric"
              value={amount}
              onChange={(e) => setAmount(e.target.value)}
            />
          )}
        </Field>
        <div className="field-pair">
          <Field label="Duration" error={err('duration')}>
            {(p) => (
              <input
                {...p}
                name="duration"
                type="number"
                inputMode="numeric"
                value={unit === 'lifetime' ? '' : duration}
                disabled={unit === 'lifetime'}
                onChange={(e) => setDuration(e.target.value)}
              />
            )}
          </Field>
          <Field label="Unit" error={err('unit')}>
            {(p) => (
              <select {...p} name="unit" value={unit} onChange={(e) => setUnit(e.target.value as DurationUnit)}>
                {UNITS.map((u) => (
                  <option key={u} value={u}>
                    {u[0]!.toUpperCase() + u.slice(1)}
                  </option>
                ))}
              </select>
            )}
          </Field>
        </div>
        <Field label="Level" error={err('level')}>
          {(p) => (
            <input
              {...p}
              name="level"
              type="number"
              inputMode="numeric"
              value={level}
              onChange={(e) => setLevel(e.target.value)}
            />
          )}
        </Field>
        <Field
          label="Concurrent sessions"
          error={err('max_sessions')}
          hint={`Live heartbeat sessions per key; 0 = unlimited. Blank: the application's (${app.max_sessions ?? 0}).`}
        >
          {(p) => (
            <input
              {...p}
              name="max_sessions"
              inputMode="numeric"
              value={seats}
              placeholder={String(app.max_sessions ?? 0)}
              onChange={(e) => setSeats(e.target.value)}
            />
          )}
        </Field>
        <Field label="Note" error={err('note')} hint="Stored on every key of the batch.">
          {(p) => <input {...p} name="note" value={note} onChange={(e) => setNote(e.target.value)} />}
        </Field>
        <Field
          label="Devices per key"
          error={err('max_devices')}
          hint={`Blank: the application's ${app.max_devices} (applies with HWID lock).`}
        >
          {(p) => (
            <input
              {...p}
              name="max_devices"
              inputMode="numeric"
              value={maxDevices}
              onChange={(e) => setMaxDevices(e.target.value)}
            />
          )}
        </Field>
        {(catalogue.data?.entitlements ?? []).length > 0 && (
          <EntitlementPicks
            catalogue={catalogue.data!.entitlements}
            value={codes}
            onChange={setCodes}
            name="gen-entitlement"
            className="span-2"
          />
        )}
        {price && (
          <div
            className={`span-2 price${price.refused ? ' price-refused' : ''}`}
            role={price.refused ? 'alert' : 'status'}
            data-testid="price"
          >
            Price: {plural(price.perKey, 'credit')} per key × {formatCount(amountN)} ={' '}
            <strong>{plural(price.total, 'credit')}</strong>. Balance:{' '}
            {price.balance === null ? 'unlimited' : formatCount(price.balance)}.
            {price.refused && (
              <strong>
                {' '}
                Not enough credits: this batch costs {formatCount(price.total)}, your balance is{' '}
                {formatCount(price.balance ?? 0)}.
              </strong>
            )}
          </div>
        )}
        <FormError
          error={generate.error}
          fields={[
            'mask',
            'alphabet',
            'amount',
            'duration',
            'unit',
            'level',
            'max_sessions',
            'note',
            'max_devices',
            'entitlements',
          ]}
        />
        <div className="actions span-2">
          <Button
            type="submit"
            variant="primary"
            busy={generate.isPending}
            busyLabel="Generating"
            disabled={price?.refused ?? false}
          >
            Generate
          </Button>
        </div>
      </form>
      <Confirm
        open={crowded !== null}
        title="Generate from such a small key space?"
        message={
          crowded && (
            <>
              This mask and these characters allow only {plural(crowded.space, 'different key')}; a batch of{' '}
              {formatCount(crowded.body.amount)} takes {Math.max(1, Math.round(crowded.share * 100))} % of them. Keys
              from a space this small are easy to guess, and later batches will run out of new keys. A longer mask or
              more character classes avoid both.
            </>
          )
        }
        confirmLabel="Generate anyway"
        cancelLabel="Change the mask"
        onConfirm={() => {
          const body = crowded!.body;
          setCrowded(null);
          generate.mutate(body);
        }}
        onClose={() => setCrowded(null)}
      />
      <BatchHistory batches={history} onShow={setShown} />
      <KeysDialog batch={shown} onClose={() => setShown(null)} />
    </section>
  );
}

function downloadName(b: Batch, ext: string): string {
  const safe = b.app_name.replace(/[^A-Za-z0-9_-]+/g, '-').replace(/^-|-$/g, '') || 'keys';
  return `${safe}-keys-${b.at.slice(0, 19).replace(/[:T]/g, '-')}.${ext}`;
}

function BatchActions({ b }: { b: Batch }) {
  return (
    <>
      <CopyButton text={keysTxt(b.keys).trimEnd()} label="Copy keys" />
      <Button variant="ghost" onClick={() => saveFile(downloadName(b, 'txt'), keysTxt(b.keys), 'text/plain')}>
        Download .txt
      </Button>
      <Button variant="ghost" onClick={() => saveFile(downloadName(b, 'csv'), keysCsv(b.keys), 'text/csv')}>
        Download .csv
      </Button>
    </>
  );
}

function KeysDialog({ batch, onClose }: { batch: Batch | null; onClose: () => void }) {
  return (
    <Dialog open={batch !== null} title={batch ? `${plural(batch.keys.length, 'new key')}` : ''} onClose={onClose} wide>
      {batch && (
        <>
          <p className="alert alert-warn">
            The server shows plaintext keys only now: copy or download them. This browser keeps the last 5 batches until
            you close it.
          </p>
          <textarea
            className="keys mono"
            readOnly
            rows={Math.min(12, batch.keys.length + 1)}
            value={keysTxt(batch.keys)}
            aria-label="Generated keys"
            data-testid="generated-keys"
          />
          <div className="actions">
            <BatchActions b={batch} />
            <Button variant="primary" onClick={onClose}>
              Done
            </Button>
          </div>
        </>
      )}
    </Dialog>
  );
}

function BatchHistory({ batches, onShow }: { batches: Batch[]; onShow: (b: Batch) => void }) {
  if (batches.length === 0) return null;
  return (
    <div className="history">
      <h3>
        Recent batches <span className="muted">(this browser session, last 5)</span>
      </h3>
      <ul aria-label="Recent batches" data-testid="batch-history">
        {batches.map((b) => (
          <li key={b.id}>
            <span>
              <Time iso={b.at} /> · {plural(b.keys.length, 'key')} · {b.app_name}
            </span>
            <span className="row-actions">
              <Button variant="ghost" onClick={() => onShow(b)}>
                Show
              </Button>
              <BatchActions b={b} />
            </span>
          </li>
        ))}
      </ul>
    </div>
  );
}
