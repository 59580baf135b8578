// The Licenses bulk bar: how many keys are selected, "select all N matching" (every cursor page of
// the current filters is read to collect the ids, with progress and Cancel), the bulk actions,
// the progress of a run with Cancel, and its report (succeeded, failed with each detail, not sent);
// a run over all matching keys is one server job, whose report names the skipped keys and why.
import type { BulkResult } from '../lib/bulk.js';
import type { Job } from '../api/responses.js';
import { formatCount, plural } from '../lib/plural.js';
import { Button } from '../components/ui.js';
import { ACTION_LABEL, type Action } from './LicenseColumns.js';

export interface SelectedKey {
  id: string;
  key_preview: string;
}

export interface Progress {
  label: string;
  done: number;
  total: number | null;
  cancel: () => void;
}

export function BulkBar({
  selected,
  matching,
  actions,
  busy,
  onAction,
  onSelectAll,
  onClear,
}: {
  selected: number;
  /** Keys matching the filters: exact, known from the stats, or null when only walking the pages tells. */
  matching: number | null;
  actions: readonly Action[];
  busy: boolean;
  onAction: (a: Action) => void;
  onSelectAll: () => void;
  onClear: () => void;
}) {
  const all = matching !== null && selected >= matching;
  return (
    <div className="bulk-bar" role="region" aria-label="Bulk actions">
      <span data-testid="selected-count">
        {all ? `All ${plural(selected, 'matching key')} selected` : `${formatCount(selected)} selected`}
      </span>
      {!all && (
        <Button variant="ghost" disabled={busy} onClick={onSelectAll}>
          {matching === null ? 'Select every matching key' : `Select all ${plural(matching, 'matching key')}`}
        </Button>
      )}
      {actions.map((a) => (
        <Button key={a} variant={a === 'delete' ? 'danger' : 'plain'} disabled={busy} onClick={() => onAction(a)}>
          {ACTION_LABEL[a]} selected
        </Button>
      ))}
      <Button variant="ghost" disabled={busy} onClick={onClear}>
        Clear selection
      </Button>
    </div>
  );
}

export function ProgressLine({ progress }: { progress: Progress }) {
  const { label, done, total } = progress;
  return (
    <div className="progress-line" role="status" aria-live="polite" data-testid="bulk-progress">
      <progress {...(total ? { max: total, value: done } : {})} aria-label={label} />
      <span>
        {label}: {formatCount(done)}
        {total ? ` of ${formatCount(total)}` : ''}
      </span>
      <Button variant="ghost" onClick={progress.cancel}>
        Cancel
      </Button>
    </div>
  );
}

const SHOWN_FAILURES = 50;

export function BulkReport({
  label,
  result,
  onClose,
}: {
  label: string;
  result: BulkResult<SelectedKey>;
  onClose: () => void;
}) {
  const failed = result.failed.length;
  return (
    <div
      className={`alert ${failed || result.notSent ? 'alert-warn' : 'alert-ok'}`}
      role="status"
      data-testid="bulk-report"
    >
      <div>
        <strong>{label}:</strong> {formatCount(result.succeeded)} succeeded, {formatCount(failed)} failed
        {result.notSent > 0 ? `, ${formatCount(result.notSent)} not sent (cancelled)` : ''}.
        {failed > 0 && (
          <ul>
            {result.failed.slice(0, SHOWN_FAILURES).map((f) => (
              <li key={f.item.id}>
                <code>{f.item.key_preview}</code>: {f.detail}
              </li>
            ))}
            {failed > SHOWN_FAILURES && <li>and {plural(failed - SHOWN_FAILURES, 'more failure')}</li>}
          </ul>
        )}
      </div>
      <Button variant="ghost" onClick={onClose} aria-label="Dismiss">
        ✕
      </Button>
    </div>
  );
}

/** The end of a bulk job (docs/api.md "Bulk jobs"): its counts and the first skipped keys with the reason. */
export function JobReport({ label, job, onClose }: { label: string; job: Job; onClose: () => void }) {
  const skipped = job.skipped_keys ?? [];
  const unreached = job.total - job.done;
  return (
    <div
      className={`alert ${job.skipped || unreached || job.status === 'failed' ? 'alert-warn' : 'alert-ok'}`}
      role="status"
      data-testid="bulk-report"
    >
      <div>
        <strong>{label}:</strong> {formatCount(job.succeeded)} succeeded, {formatCount(job.skipped)} skipped
        {unreached > 0 ? `, ${formatCount(unreached)} not reached (${job.status})` : ''}.
        {skipped.length > 0 && (
          <ul>
            {skipped.slice(0, SHOWN_FAILURES).map((f) => (
              <li key={f.id}>
                <code>{f.key_preview ?? f.id}</code>: {f.reason}
              </li>
            ))}
            {job.skipped > SHOWN_FAILURES && <li>and {plural(job.skipped - SHOWN_FAILURES, 'more skipped key')}</li>}
          </ul>
        )}
      </div>
      <Button variant="ghost" onClick={onClose} aria-label="Dismiss">
        ✕
      </Button>
    </div>
  );
}
