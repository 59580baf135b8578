// "Activate a machine without internet" (docs/air-gapped.md): two steps a customer can follow on a
// phone. 1: give the request file the program wrote on the offline machine (choose the file, or paste
// its text); 2: save the answer and take it back to that machine.
import { useState, type FormEvent } from 'react';
import { call, failureText } from './api.js';
import { saveFile } from '../lib/download.js';

export function OfflineActivation({ onDone }: { onDone: () => void }) {
  const [request, setRequest] = useState('');
  const [response, setResponse] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const r = await call<{ response: string }>('POST', '/api/portal/offline-activation', { request: request.trim() });
      setResponse(r.response);
      onDone();
    } catch (err) {
      setError(failureText(err));
    } finally {
      setBusy(false);
    }
  };
  const save = () => saveFile('license-response.txt', response + '\n', 'text/plain');
  return (
    <section className="card airgap" aria-label="Activate a machine without internet">
      <h2>Activate a machine without internet</h2>
      <ol className="steps">
        <li aria-current={response ? undefined : 'step'}>
          <h3>Step 1: give us the request</h3>
          <p className="muted">
            On the machine without internet, the program saved a request file (it starts with <code>kwreq1.</code>).
            Bring it here on a USB stick, or copy its text.
          </p>
          <form onSubmit={submit}>
            <label>
              Choose the request file
              <input
                type="file"
                accept=".txt,.kwreq,text/plain"
                onChange={(e) => {
                  const f = e.target.files?.[0];
                  if (f) void f.text().then((t) => setRequest(t.trim()));
                }}
              />
            </label>
            <label>
              Or paste its text
              <textarea
                rows={4}
                value={request}
                onChange={(e) => setRequest(e.target.value)}
                autoComplete="off"
                spellCheck={false}
              />
            </label>
            {error && (
              <p role="alert" className="error">
                {error}
              </p>
            )}
            <button type="submit" disabled={busy || request.trim() === ''}>
              Activate
            </button>
          </form>
        </li>
        <li aria-current={response ? 'step' : undefined} className={response ? '' : 'pending'}>
          <h3>Step 2: take the answer back</h3>
          {response ? (
            <>
              <p role="status">Done: the machine is activated on your license.</p>
              <button type="button" onClick={save}>
                Save the answer file
              </button>
              <p className="muted">
                Copy <code>license-response.txt</code> to the machine without internet and open it in the program.
              </p>
            </>
          ) : (
            <p className="muted">After step 1 you save an answer file here and copy it back to that machine.</p>
          )}
        </li>
      </ol>
    </section>
  );
}
