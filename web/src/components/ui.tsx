// Small accessible building blocks: labelled fields with their error, switches, buttons that show
// progress after 300 ms, dialogs (native <dialog>: focus trap and Escape for free), times in the
// browser's zone with the UTC value on hover, empty and error states.
import { useEffect, useId, useRef, useState, type ButtonHTMLAttributes, type ReactNode } from 'react';
import { ApiError } from '../api/errors.js';
import { localTime, utcTitle } from '../lib/time.js';

/** True once `active` has stayed true for `ms` (progress is shown only for actions over 300 ms). */
export function useDelayed(active: boolean, ms = 300): boolean {
  const [late, setLate] = useState(false);
  useEffect(() => {
    if (!active) {
      setLate(false);
      return;
    }
    const t = setTimeout(() => setLate(true), ms);
    return () => clearTimeout(t);
  }, [active, ms]);
  return active && late;
}

export function Spinner({ label = 'Loading' }: { label?: string }) {
  return <span className="spinner" role="progressbar" aria-label={label} />;
}

type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & { busy?: boolean; busyLabel?: string; variant?: 'primary' | 'danger' | 'ghost' | 'plain' };

/** A button that disables itself while busy and shows progress once the action takes over 300 ms. */
export function Button({ busy = false, busyLabel, variant = 'plain', children, className, disabled, type = 'button', ...rest }: ButtonProps) {
  const late = useDelayed(busy);
  return (
    <button type={type} className={`btn btn-${variant}${className ? ` ${className}` : ''}`} disabled={disabled || busy} aria-busy={busy || undefined} {...rest}>
      {late ? <><Spinner label={busyLabel ?? 'Working'} /> {busyLabel ?? children}</> : children}
    </button>
  );
}

export function Field({ label, error, hint, children, id, className }: { label: ReactNode; error?: string | undefined; hint?: ReactNode; children: (props: { id: string; 'aria-invalid'?: boolean; 'aria-describedby'?: string }) => ReactNode; id?: string; className?: string }) {
  const auto = useId();
  const fid = id ?? auto;
  const errId = `${fid}-error`;
  const hintId = `${fid}-hint`;
  const describedBy = [error ? errId : '', hint ? hintId : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div className={`field${error ? ' field-invalid' : ''}${className ? ` ${className}` : ''}`}>
      <label htmlFor={fid}>{label}</label>
      {children({ id: fid, ...(error ? { 'aria-invalid': true } : {}), ...(describedBy ? { 'aria-describedby': describedBy } : {}) })}
      {hint && <div className="hint" id={hintId}>{hint}</div>}
      {error && <div className="field-error" id={errId} role="alert">{error}</div>}
    </div>
  );
}

export function Switch({ label, checked, onChange, error, hint, disabled }: { label: ReactNode; checked: boolean; onChange: (v: boolean) => void; error?: string | undefined; hint?: ReactNode; disabled?: boolean }) {
  const id = useId();
  return (
    <div className={`switch-field${error ? ' field-invalid' : ''}`}>
      <label className="switch" htmlFor={id}>
        <input id={id} type="checkbox" role="switch" checked={checked} disabled={disabled} onChange={(e) => onChange(e.target.checked)} aria-invalid={error ? true : undefined} />
        <span className="switch-track" aria-hidden="true" />
        <span>{label}</span>
      </label>
      {hint && <div className="hint">{hint}</div>}
      {error && <div className="field-error" role="alert">{error}</div>}
    </div>
  );
}

/**
 * The server's message for a failed form, unless every field it names is shown next to its field
 * already (`fields`: the field names this form displays).
 */
export function FormError({ error, fields = [] }: { error: unknown; fields?: readonly string[] }) {
  if (!error) return null;
  if (error instanceof ApiError) {
    const named = Object.keys(error.fields);
    if (named.length > 0 && named.every((f) => fields.some((k) => f === k || f.startsWith(`${k}.`)))) return null;
    return <div className="alert alert-error" role="alert">{error.message}{error.retryAfter ? ` (try again in ${retryText(error.retryAfter)})` : ''}</div>;
  }
  return <div className="alert alert-error" role="alert">{error instanceof Error ? error.message : String(error)}</div>;
}

export function retryText(seconds: number): string {
  return seconds >= 90 ? `${Math.ceil(seconds / 60)} minutes` : `${seconds} s`;
}

export function fieldError(error: unknown, name: string): string | undefined {
  return error instanceof ApiError ? error.field(name) : undefined;
}

export function Time({ iso, empty = '—' }: { iso: string | null | undefined; empty?: string }) {
  if (!iso) return <span className="muted">{empty}</span>;
  return <time dateTime={iso} title={utcTitle(iso)}>{localTime(iso)}</time>;
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty" role="note">
      <strong>{title}</strong>
      {children && <div>{children}</div>}
    </div>
  );
}

/** A failed load: the server's detail and a way to try again. Never a blank page. */
export function ErrorState({ error, retry }: { error: unknown; retry?: () => void }) {
  return (
    <div className="alert alert-error error-state" role="alert">
      <span>{error instanceof Error ? error.message : 'Something went wrong.'}</span>
      {retry && <Button onClick={retry}>Try again</Button>}
    </div>
  );
}

export function Loading({ label = 'Loading' }: { label?: string }) {
  const late = useDelayed(true);
  return <div className="loading" aria-live="polite">{late && <><Spinner label={label} /> {label}…</>}</div>;
}

/** A modal dialog on the native <dialog> element (Escape closes it, focus stays inside). */
export function Dialog({ open, title, onClose, children, wide }: { open: boolean; title: string; onClose: () => void; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} className={`dialog${wide ? ' dialog-wide' : ''}`} aria-labelledby={titleId} onClose={onClose} onCancel={(e) => { e.preventDefault(); onClose(); }}>
      {open && (
        <>
          <div className="dialog-head">
            <h2 id={titleId}>{title}</h2>
            <button type="button" className="btn btn-ghost" aria-label="Close" onClick={onClose}>✕</button>
          </div>
          <div className="dialog-body">{children}</div>
        </>
      )}
    </dialog>
  );
}

/** Asks before a destructive action; `typed` makes the user type a word (the app's name) first. */
export function Confirm({ open, title, message, confirmLabel, cancelLabel = 'Cancel', typed, busy, error, onConfirm, onClose }: {
  open: boolean; title: string; message: ReactNode; confirmLabel: string; cancelLabel?: string; typed?: string; busy?: boolean; error?: unknown; onConfirm: () => void; onClose: () => void;
}) {
  const [text, setText] = useState('');
  useEffect(() => {
    if (!open) setText('');
  }, [open]);
  const ready = typed === undefined || text === typed;
  return (
    <Dialog open={open} title={title} onClose={onClose}>
      <form onSubmit={(e) => { e.preventDefault(); if (ready) onConfirm(); }}>
        <div className="confirm-message">{message}</div>
        {typed !== undefined && (
          <Field label={<>Type <code>{typed}</code> to confirm</>}>
            {(p) => <input {...p} value={text} onChange={(e) => setText(e.target.value)} autoComplete="off" autoFocus />}
          </Field>
        )}
        <FormError error={error} />
        <div className="actions">
          <Button onClick={onClose}>{cancelLabel}</Button>
          <Button type="submit" variant="danger" busy={busy ?? false} disabled={!ready}>{confirmLabel}</Button>
        </div>
      </form>
    </Dialog>
  );
}

function legacyCopy(text: string): boolean {
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <Button
      variant="ghost"
      className="copy"
      aria-label={`${label}${done ? ' (copied)' : ''}`}
      onClick={() => {
        const ok = () => {
          setDone(true);
          setTimeout(() => setDone(false), 1500);
        };
        // The Clipboard API exists only in secure contexts (https, localhost); plain http elsewhere falls back.
        if (navigator.clipboard) void navigator.clipboard.writeText(text).then(ok, () => legacyCopy(text) && ok());
        else if (legacyCopy(text)) ok();
      }}
    >
      {done ? 'Copied' : label}
    </Button>
  );
}

export function Badge({ tone, children }: { tone: 'green' | 'red' | 'grey' | 'amber' | 'blue'; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}
