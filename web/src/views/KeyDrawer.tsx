// One key in detail (docs/protocol.md 12, 15.2): its devices with first and last use (each removable), its
// level, note, device and session limits and entitlements (the changed ones saved with
// PATCH /api/licenses/{id}, each refusal shown at its field), and "Issue offline file" for an
// air-gapped machine, downloaded as <key>.kwlic; an offline activation request answered and seat pools
// for a relay (KeyAirgap.tsx).
import { useEffect, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, licenses as licensesApi, type LicensePatch } from '../api/endpoints.js';
import type { App, License } from '../api/responses.js';
import { Button, Dialog, Field, FormError, Time, fieldError } from '../components/ui.js';
import { saveFile } from '../lib/download.js';
import { EntitlementPicks } from '../components/EntitlementPicks.js';
import { OfflineActivationBox, SeatPools } from './KeyAirgap.js';
import { can, isManager } from '../lib/permissions.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';

export function KeyDrawer({ app, license, onClose }: { app: App; license: License | null; onClose: () => void }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [row, setRow] = useState<License | null>(license);
  const [level, setLevel] = useState('');
  const [note, setNote] = useState('');
  const [maxDevices, setMaxDevices] = useState('');
  const [seats, setSeats] = useState('');
  const [codes, setCodes] = useState<string[]>([]);
  const [hwid, setHwid] = useState('');
  useEffect(() => {
    setRow(license);
    setLevel(license ? String(license.level) : '');
    setNote(license?.note ?? '');
    setMaxDevices(license?.max_devices == null ? '' : String(license.max_devices));
    setSeats(license?.max_sessions == null ? '' : String(license.max_sessions));
    setCodes(license?.entitlements ?? []);
    setHwid('');
  }, [license]);
  const catalogue = useQuery({
    queryKey: ['entitlements', app.id],
    queryFn: () => appsApi.entitlements(app.id),
    enabled: license !== null,
  });
  const mayEdit = isManager(caller) || can(caller, 'generate_keys');
  const refresh = () => void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
  const save = useMutation({
    mutationFn: async () => {
      const body = licenseChanges(row!, { level, note, maxDevices, seats, codes });
      return Object.keys(body).length === 0 ? null : licensesApi.update(row!.id, body);
    },
    onSuccess: (updated) => {
      if (!updated) {
        notice('ok', 'Nothing changed');
        return;
      }
      setRow(updated);
      refresh();
      notice('ok', `${updated.key_preview}: saved`);
    },
  });
  const removeDevice = useMutation({
    mutationFn: (h: string) => licensesApi.removeDevice(row!.id, h),
    onSuccess: (_r, h) => {
      setRow((r) => (r ? { ...r, devices: (r.devices ?? []).filter((d) => d.hwid !== h) } : r));
      refresh();
      notice('ok', 'Device removed');
    },
  });
  const offline = useMutation({
    mutationFn: () => licensesApi.offline(row!.id, hwid.trim()),
    onSuccess: (r) => {
      setRow(r.license);
      refresh();
      saveFile(`${r.license.key_preview.replace(/\*/g, '')}.kwlic`, r.license_file + '\n', 'application/octet-stream');
      notice('ok', 'Offline license file issued');
    },
  });
  const devices = row?.devices;
  return (
    <Dialog open={license !== null} title={row ? `Key ${row.key_preview}` : ''} onClose={onClose} wide>
      {row && (
        <div className="key-drawer">
          <p className="muted small">
            {row.status} · level {row.level} · expires <Time iso={row.expires_at} empty="—" />
            {row.note ? ` · ${row.note}` : ''}
          </p>
          {devices !== undefined && (
            <section aria-label="Devices">
              <h3>Devices</h3>
              {devices.length === 0 ? (
                <p className="muted small">No device has used this key.</p>
              ) : (
                <table className="devices-table">
                  <thead>
                    <tr>
                      <th>HWID</th>
                      <th>First seen</th>
                      <th>Last seen</th>
                      <th />
                    </tr>
                  </thead>
                  <tbody>
                    {devices.map((d) => (
                      <tr key={d.hwid}>
                        <td>
                          <code className="mono small">{d.hwid}</code>
                        </td>
                        <td>
                          <Time iso={d.first_seen} />
                        </td>
                        <td>
                          <Time iso={d.last_seen} />
                        </td>
                        <td>
                          {can(caller, 'reset_hwid') && (
                            <Button
                              variant="danger"
                              busy={removeDevice.isPending && removeDevice.variables === d.hwid}
                              onClick={() => removeDevice.mutate(d.hwid)}
                            >
                              Remove
                            </Button>
                          )}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </section>
          )}
          <form
            noValidate
            aria-label="Edit key"
            className="form-grid"
            onSubmit={(e) => {
              e.preventDefault();
              save.mutate();
            }}
          >
            <Field label="Level" error={fieldError(save.error, 'level')}>
              {(p) => (
                <input
                  {...p}
                  name="level"
                  inputMode="numeric"
                  value={level}
                  disabled={!mayEdit}
                  onChange={(e) => setLevel(e.target.value)}
                />
              )}
            </Field>
            <Field
              label="Concurrent sessions"
              error={fieldError(save.error, 'max_sessions')}
              hint={`Live heartbeat sessions of this key; 0 = unlimited. Blank: the application's (${app.max_sessions ?? 0}).`}
            >
              {(p) => (
                <input
                  {...p}
                  name="max_sessions"
                  inputMode="numeric"
                  value={seats}
                  placeholder={String(app.max_sessions ?? 0)}
                  disabled={!mayEdit}
                  onChange={(e) => setSeats(e.target.value)}
                />
              )}
            </Field>
            <Field label="Note" error={fieldError(save.error, 'note')} className="span-2">
              {(p) => (
                <input {...p} name="note" value={note} disabled={!mayEdit} onChange={(e) => setNote(e.target.value)} />
              )}
            </Field>
            <Field
              label="Devices (this key)"
              error={fieldError(save.error, 'max_devices')}
              hint={`Blank: the application's ${app.max_devices}. Applies with HWID lock.`}
            >
              {(p) => (
                <input
                  {...p}
                  name="max_devices"
                  inputMode="numeric"
                  value={maxDevices}
                  disabled={!mayEdit}
                  onChange={(e) => setMaxDevices(e.target.value)}
                />
              )}
            </Field>
            <EntitlementPicks
              catalogue={catalogue.data?.entitlements ?? []}
              value={codes}
              onChange={setCodes}
              name="entitlement"
              disabled={!mayEdit}
              className="span-2"
            />
            <FormError error={save.error} fields={['level', 'note', 'max_devices', 'max_sessions', 'entitlements']} />
            {mayEdit && (
              <div className="actions span-2">
                <Button type="submit" variant="primary" busy={save.isPending} busyLabel="Saving">
                  Save key
                </Button>
              </div>
            )}
          </form>
          {mayEdit && (
            <form
              noValidate
              aria-label="Issue offline file"
              onSubmit={(e) => {
                e.preventDefault();
                offline.mutate();
              }}
            >
              <h3>Offline license file</h3>
              <Field
                label="Machine HWID"
                error={fieldError(offline.error, 'hwid')}
                hint={
                  app.offline_days > 0
                    ? `For an air-gapped machine: valid ${app.offline_days} days (or until the key expires). Binds the HWID to this key.`
                    : 'Offline files are off: set “Offline file validity” in Settings.'
                }
              >
                {(p) => <input {...p} name="offline_hwid" value={hwid} onChange={(e) => setHwid(e.target.value)} />}
              </Field>
              <FormError error={offline.error} fields={['hwid']} />
              <div className="actions">
                <Button type="submit" busy={offline.isPending} busyLabel="Issuing" disabled={hwid.trim() === ''}>
                  Issue offline file
                </Button>
              </div>
            </form>
          )}
          {mayEdit && <OfflineActivationBox app={app} />}
          {isManager(caller) && <SeatPools license={row} />}
        </div>
      )}
    </Dialog>
  );
}

/** A whole number as typed, else the text itself, so the server's 422 says what the field takes. */
function wholeOrText(v: string): number {
  const t = v.trim();
  return (/^-?\d+$/.test(t) ? Number(t) : t) as number;
}

/** The fields that differ from the key as loaded: PATCH sends only those (blank limit = the application's). */
export function licenseChanges(
  k: License,
  v: { level: string; note: string; maxDevices: string; seats: string; codes: string[] },
): LicensePatch {
  const body: LicensePatch = {};
  if (v.level.trim() !== String(k.level)) body.level = wholeOrText(v.level);
  if (v.note !== (k.note ?? '')) body.note = v.note;
  const devices = v.maxDevices.trim() === '' ? null : wholeOrText(v.maxDevices);
  if (devices !== (k.max_devices ?? null)) body.max_devices = devices;
  const seats = v.seats.trim() === '' ? null : wholeOrText(v.seats);
  if (seats !== (k.max_sessions ?? null)) body.max_sessions = seats;
  const was = [...(k.entitlements ?? [])].sort();
  const now = [...v.codes].sort();
  if (was.length !== now.length || was.some((c, i) => c !== now[i])) body.entitlements = v.codes;
  return body;
}
