// Importing existing keys (docs/protocol.md 15.6), for owners, admins and developers: paste or pick a file
// (one key per line, a CSV with the list columns, or KeyAuth's licenses exported as JSON), see what
// a dry run says (how many would be imported, which are skipped and why, or the row the server
// refuses), then import exactly that text with "Import N keys".
import { useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { licenses as licensesApi } from '../api/endpoints.js';
import { ApiError } from '../api/errors.js';
import type { App, ImportResult } from '../api/responses.js';
import { Button, Dialog, FormError } from '../components/ui.js';
import { ImportParseError, parseImport, rowOfIssue, type ParsedImport } from '../lib/import-keys.js';
import { formatCount, plural } from '../lib/plural.js';
import { useNotice } from '../notices.js';

/** At most this many skipped keys are listed in the preview; the rest are counted. */
const SKIPPED_SHOWN = 50;

const KIND_TEXT: Record<ParsedImport['kind'], string> = {
  'keyauth-json': 'KeyAuth license rows (JSON)',
  json: 'a JSON list of keys',
  csv: 'a CSV with a header row',
  lines: 'one key per line',
};

/** The row a 422 names, with what that row holds, or null when it names none. */
function refusedRow(error: unknown, parsed: ParsedImport | null): { index: number; text: string; row: string } | null {
  if (!(error instanceof ApiError) || error.status !== 422) return null;
  for (const [path, text] of Object.entries(error.fields)) {
    const at = rowOfIssue(path);
    if (!at) continue;
    const row = parsed?.body.keys[at.index];
    const shown = row === undefined ? '' : JSON.stringify(row);
    return {
      index: at.index,
      text: text.replace(/^Row \d+: /, ''),
      row: shown.length > 200 ? `${shown.slice(0, 200)}…` : shown,
    };
  }
  return null;
}

export function ImportDialog({ app, open, onClose }: { app: App; open: boolean; onClose: () => void }) {
  const qc = useQueryClient();
  const notice = useNotice();
  const [text, setText] = useState('');
  const [local, setLocal] = useState('');
  const [parsed, setParsed] = useState<ParsedImport | null>(null);
  const preview = useMutation({
    mutationFn: (p: ParsedImport) => licensesApi.import(app.id, p.body, true),
  });
  const commit = useMutation({
    mutationFn: (p: ParsedImport) => licensesApi.import(app.id, p.body, false),
    onSuccess: (r: ImportResult) => {
      void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
      void qc.invalidateQueries({ queryKey: ['stats', app.id] });
      notice(
        'ok',
        `Imported ${plural(r.imported, 'key')}${r.skipped.length > 0 ? `, ${formatCount(r.skipped.length)} skipped` : ''}`,
      );
      close();
    },
  });

  const reset = () => {
    setLocal('');
    setParsed(null);
    preview.reset();
    commit.reset();
  };
  const close = () => {
    setText('');
    reset();
    onClose();
  };
  const edit = (v: string) => {
    setText(v);
    reset();
  };
  const runPreview = () => {
    reset();
    try {
      const p = parseImport(text);
      setParsed(p);
      preview.mutate(p);
    } catch (err) {
      setLocal(err instanceof ImportParseError ? err.message : String(err));
    }
  };
  const result = preview.data;
  const refused = refusedRow(preview.error ?? commit.error, parsed);

  return (
    <Dialog open={open} title="Import keys" onClose={close} wide>
      <form
        noValidate
        aria-label="Import keys"
        onSubmit={(e) => {
          e.preventDefault();
          runPreview();
        }}
      >
        <p className="muted small">
          One key per line; a CSV whose header names <code>key</code> and any of <code>duration</code>,{' '}
          <code>unit</code>, <code>level</code>, <code>note</code>, <code>status</code>, <code>used_by</code>,{' '}
          <code>hwid</code>, <code>expires_at</code>; or KeyAuth&apos;s licenses exported as JSON. Keys the application
          already has are skipped. Up to 50,000 keys.
        </p>
        <div className="field">
          <label htmlFor="import-text">Keys to import</label>
          <textarea
            id="import-text"
            name="import"
            className="mono"
            rows={8}
            spellCheck={false}
            value={text}
            onChange={(e) => edit(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="import-file">Or choose a file</label>
          <input
            id="import-file"
            type="file"
            name="import-file"
            accept=".txt,.csv,.json,text/plain,text/csv,application/json"
            onChange={(e) => {
              const file = e.target.files?.[0];
              if (file) void file.text().then(edit);
            }}
          />
        </div>
        {local && (
          <div className="alert alert-error" role="alert">
            {local}
          </div>
        )}
        {refused ? (
          <div className="alert alert-error" role="alert" data-testid="import-refused">
            Nothing was imported: row {refused.index} (entry {formatCount(refused.index + 1)} of the list) is refused:{' '}
            {refused.text}
            {refused.row && (
              <>
                {' '}
                <code className="mono small">{refused.row}</code>
              </>
            )}
          </div>
        ) : (
          <FormError error={preview.error ?? commit.error} />
        )}
        {result && parsed && (
          <div className="import-preview" role="status" data-testid="import-preview">
            <p>
              Read as {KIND_TEXT[parsed.kind]}: <strong>{plural(result.imported, 'key')} will be imported</strong>
              {result.skipped.length > 0 ? `, ${formatCount(result.skipped.length)} skipped` : ''}.
            </p>
            {result.skipped.length > 0 && (
              <ul className="small" aria-label="Skipped keys">
                {result.skipped.slice(0, SKIPPED_SHOWN).map((s, i) => (
                  <li key={i}>
                    <code className="mono">{s.key_preview}</code>: {s.reason}
                  </li>
                ))}
                {result.skipped.length > SKIPPED_SHOWN && (
                  <li className="muted">and {formatCount(result.skipped.length - SKIPPED_SHOWN)} more</li>
                )}
              </ul>
            )}
          </div>
        )}
        <div className="actions">
          <Button type="submit" busy={preview.isPending} busyLabel="Checking" disabled={text.trim() === ''}>
            Preview
          </Button>
          {result && parsed && (
            <Button
              variant="primary"
              busy={commit.isPending}
              busyLabel="Importing"
              disabled={result.imported === 0}
              onClick={() => commit.mutate(parsed)}
            >
              {`Import ${plural(result.imported, 'key')}`}
            </Button>
          )}
        </div>
      </form>
    </Dialog>
  );
}
