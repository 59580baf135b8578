// The Licenses dialogs: extend (or subtract from) the selected keys, and extend every active key.
import { useEffect, useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { licenses as licensesApi } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { Button, Dialog, Field, FormError, fieldError } from '../components/ui.js';
import { plural } from '../lib/plural.js';
import type { SelectedKey } from './LicenseBulk.js';

export function ExtendDialog({
  pending,
  onClose,
  onSubmit,
  busy,
}: {
  pending: SelectedKey[] | null;
  onClose: () => void;
  onSubmit: (v: { value: number; unit: string; subtract: boolean }) => void;
  busy: boolean;
}) {
  const [value, setValue] = useState('7');
  const [unit, setUnit] = useState('days');
  const [subtract, setSubtract] = useState(false);
  return (
    <Dialog
      open={pending !== null}
      title={
        pending && pending.length === 1
          ? `Extend ${pending[0]!.key_preview}`
          : `Extend ${plural(pending?.length ?? 0, 'key')}`
      }
      onClose={onClose}
    >
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          onSubmit({ value: Number(value), unit, subtract });
        }}
      >
        <div className="field-pair">
          <Field label="Amount of time">
            {(p) => (
              <input
                {...p}
                type="number"
                inputMode="numeric"
                value={value}
                onChange={(e) => setValue(e.target.value)}
                autoFocus
              />
            )}
          </Field>
          <Field label="Unit">
            {(p) => (
              <select {...p} value={unit} onChange={(e) => setUnit(e.target.value)}>
                {['hours', 'days', 'weeks', 'months'].map((u) => (
                  <option key={u}>{u}</option>
                ))}
              </select>
            )}
          </Field>
        </div>
        <label className="check">
          <input type="checkbox" checked={subtract} onChange={(e) => setSubtract(e.target.checked)} /> Subtract instead
          of adding
        </label>
        <p className="muted small">
          Lifetime and never-activated keys cannot be extended; they are reported as failed.
        </p>
        <div className="actions">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" busy={busy} busyLabel="Extending">
            {subtract ? 'Subtract' : 'Extend'}
          </Button>
        </div>
      </form>
    </Dialog>
  );
}

export function ExtendAllDialog({ app, open, onClose }: { app: App; open: boolean; onClose: () => void }) {
  const qc = useQueryClient();
  const [value, setValue] = useState('7');
  const [unit, setUnit] = useState('days');
  const m = useMutation({
    mutationFn: () => licensesApi.extendAll(app.id, { value: Number(value), unit: unit as 'days' }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
    },
  });
  useEffect(() => {
    if (!open) m.reset();
  }, [open]); // only when the dialog opens or closes
  return (
    <Dialog open={open} title="Extend every active key" onClose={onClose}>
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          m.mutate();
        }}
      >
        <div className="field-pair">
          <Field label="Amount of time" error={fieldError(m.error, 'value')}>
            {(p) => (
              <input
                {...p}
                type="number"
                inputMode="numeric"
                value={value}
                onChange={(e) => setValue(e.target.value)}
                autoFocus
              />
            )}
          </Field>
          <Field label="Unit" error={fieldError(m.error, 'unit')}>
            {(p) => (
              <select {...p} value={unit} onChange={(e) => setUnit(e.target.value)}>
                {['hours', 'days', 'weeks', 'months'].map((u) => (
                  <option key={u}>{u}</option>
                ))}
              </select>
            )}
          </Field>
        </div>
        <p className="muted small">Unused and lifetime keys are skipped.</p>
        <FormError error={m.error} fields={['value', 'unit']} />
        {m.data && (
          <div className="alert alert-ok" role="status">
            {plural(m.data.extended, 'key')} extended, {m.data.skipped} skipped.
          </div>
        )}
        <div className="actions">
          <Button onClick={onClose}>{m.data ? 'Close' : 'Cancel'}</Button>
          {!m.data && (
            <Button type="submit" variant="primary" busy={m.isPending} busyLabel="Extending">
              Extend all
            </Button>
          )}
        </div>
      </form>
    </Dialog>
  );
}
