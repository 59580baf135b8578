// Air-gapped machines on a key's dialog (docs/air-gapped.md): answer a machine's activation request
// (pasted or uploaded; the answer downloads as license-response.txt), and, for managers, issue a
// seat pool for `keywarden relay` (relay id, seats, validity; copied or downloaded as <key>.kwpool).
import { useState } from 'react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { licenses as licensesApi } from '../api/endpoints.js';
import type { App, License } from '../api/responses.js';
import { Button, CopyButton, Field, FormError, fieldError } from '../components/ui.js';
import { saveFile } from '../lib/download.js';
import { useNotice } from '../notices.js';

export function OfflineActivationBox({ app }: { app: App }) {
  const qc = useQueryClient();
  const notice = useNotice();
  const [request, setRequest] = useState('');
  const answer = useMutation({
    mutationFn: () => licensesApi.answerRequest(app.id, request.trim()),
    onSuccess: (r) => {
      saveFile('license-response.txt', r.response + '\n', 'text/plain');
      void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
      notice('ok', 'Activation answered: license-response.txt downloaded');
    },
  });
  return (
    <form
      noValidate
      aria-label="Offline activation"
      onSubmit={(e) => {
        e.preventDefault();
        answer.mutate();
      }}
    >
      <h3>Offline activation</h3>
      <Field
        label="Activation request"
        error={fieldError(answer.error, 'request')}
        hint={`Paste or upload the request file the machine wrote (kwreq1.). The machine is activated on its key as if it were online; the answer is valid ${Math.max(1, app.offline_days)} day${Math.max(1, app.offline_days) === 1 ? '' : 's'}.`}
      >
        {(p) => (
          <textarea
            {...p}
            name="activation_request"
            rows={3}
            className="mono small"
            value={request}
            onChange={(e) => setRequest(e.target.value)}
          />
        )}
      </Field>
      <FormError error={answer.error} fields={['request']} />
      <div className="actions">
        <label className="small" htmlFor="activation-request-file">
          Or upload the file{' '}
          <input
            id="activation-request-file"
            type="file"
            name="activation_request_file"
            accept=".txt,.kwreq,text/plain"
            onChange={(e) => {
              const f = e.target.files?.[0];
              if (f) void f.text().then((t) => setRequest(t.trim()));
            }}
          />
        </label>
        <Button type="submit" busy={answer.isPending} busyLabel="Answering" disabled={request.trim() === ''}>
          Answer and download
        </Button>
      </div>
    </form>
  );
}

export function SeatPools({ license }: { license: License }) {
  const notice = useNotice();
  const [relayId, setRelayId] = useState('');
  const [seats, setSeats] = useState('10');
  const [days, setDays] = useState('365');
  const [pool, setPool] = useState('');
  const num = (v: string) => (/^\d+$/.test(v.trim()) ? Number(v.trim()) : (v as unknown as number));
  const issue = useMutation({
    mutationFn: () =>
      licensesApi.pool(license.id, { relay_id: relayId.trim(), seats: num(seats), valid_days: num(days) }),
    onSuccess: (r) => {
      setPool(r.pool);
      notice('ok', 'Seat pool issued');
    },
  });
  return (
    <form
      noValidate
      aria-label="Seat pools"
      className="form-grid"
      onSubmit={(e) => {
        e.preventDefault();
        issue.mutate();
      }}
    >
      <h3 className="span-2">Seat pools</h3>
      <p className="muted small span-2">
        Floating seats served on the customer&apos;s own network by <code>keywarden relay</code>. The relay id is what{' '}
        <code>keywarden relay id</code> prints on the relay machine.
      </p>
      <Field label="Relay id" error={fieldError(issue.error, 'relay_id')} className="span-2">
        {(p) => <input {...p} name="relay_id" value={relayId} onChange={(e) => setRelayId(e.target.value)} />}
      </Field>
      <Field label="Seats" error={fieldError(issue.error, 'seats')} hint="1-10,000 machines at a time">
        {(p) => (
          <input
            {...p}
            name="pool_seats"
            inputMode="numeric"
            value={seats}
            onChange={(e) => setSeats(e.target.value)}
          />
        )}
      </Field>
      <Field
        label="Valid for (days)"
        error={fieldError(issue.error, 'valid_days')}
        hint="1-3650; never past the key's expiry"
      >
        {(p) => (
          <input {...p} name="pool_days" inputMode="numeric" value={days} onChange={(e) => setDays(e.target.value)} />
        )}
      </Field>
      <FormError error={issue.error} fields={['relay_id', 'seats', 'valid_days']} />
      <div className="actions span-2">
        <Button type="submit" busy={issue.isPending} busyLabel="Issuing" disabled={relayId.trim() === ''}>
          Issue pool
        </Button>
      </div>
      {pool && (
        <div className="span-2 pool-result" aria-label="Issued pool">
          <textarea readOnly rows={3} className="mono small" value={pool} aria-label="Pool" />
          <div className="actions">
            <CopyButton text={pool} label="Copy pool" />
            <Button
              onClick={() =>
                saveFile(`${license.key_preview.replace(/\*/g, '')}.kwpool`, pool + '\n', 'application/octet-stream')
              }
            >
              Download pool
            </Button>
          </div>
        </div>
      )}
    </form>
  );
}
