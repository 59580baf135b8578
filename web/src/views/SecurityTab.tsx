// The blacklist (IP and HWID entries): listed with view_blocked_ips; added and removed by owners,
// admins and developers.
import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { Button, EmptyState, ErrorState, Field, FormError, Loading, Time, fieldError } from '../components/ui.js';
import { isManager } from '../lib/permissions.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';

export function SecurityTab({ app }: { app: App }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [type, setType] = useState<'ip' | 'hwid'>('ip');
  const [value, setValue] = useState('');
  const [reason, setReason] = useState('');
  const list = useQuery({ queryKey: ['bans', app.id], queryFn: () => appsApi.bans(app.id) });
  const add = useMutation({
    mutationFn: () => appsApi.addBan(app.id, { type, value, ...(reason.trim() ? { reason } : {}) }),
    onSuccess: (b) => {
      setValue('');
      setReason('');
      notice('ok', `${b.type.toUpperCase()} ${b.value} blocked`);
      void qc.invalidateQueries({ queryKey: ['bans', app.id] });
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => appsApi.removeBan(id),
    onSuccess: () => {
      notice('ok', 'Entry removed');
      void qc.invalidateQueries({ queryKey: ['bans', app.id] });
    },
    onError: (err) => notice('error', err.message),
  });
  return (
    <div>
      {isManager(caller) && (
        <form
          noValidate
          className="card form-inline"
          aria-label="Block an IP or HWID"
          onSubmit={(e) => {
            e.preventDefault();
            add.mutate();
          }}
        >
          <Field label="Type" error={fieldError(add.error, 'type')}>
            {(p) => (
              <select {...p} name="type" value={type} onChange={(e) => setType(e.target.value as 'ip' | 'hwid')}>
                <option value="ip">IP address</option>
                <option value="hwid">HWID</option>
              </select>
            )}
          </Field>
          <Field label="Value" error={fieldError(add.error, 'value')} className="grow">
            {(p) => (
              <input
                {...p}
                name="value"
                value={value}
                onChange={(e) => setValue(e.target.value)}
                placeholder={type === 'ip' ? '203.0.113.7 or 10.0.0.0/8' : 'device id'}
              />
            )}
          </Field>
          <Field
            label="Reason"
            error={fieldError(add.error, 'reason')}
            className="grow"
            hint={
              type === 'ip' ? 'An address or a CIDR range (IPv4 or IPv6) blocks every address inside it.' : undefined
            }
          >
            {(p) => (
              <input
                {...p}
                name="reason"
                maxLength={500}
                value={reason}
                onChange={(e) => setReason(e.target.value)}
                placeholder="optional, e.g. chargeback"
              />
            )}
          </Field>
          <Button type="submit" variant="primary" busy={add.isPending} busyLabel="Blocking">
            Block
          </Button>
          <FormError error={add.error} fields={['type', 'value', 'reason']} />
        </form>
      )}
      {list.isPending && <Loading label="Loading blacklist" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && list.data.length === 0 && (
        <EmptyState title="Nothing is blocked">
          Blocked IPs and HWIDs are refused with 403 Access denied on every client call.
        </EmptyState>
      )}
      {list.data && list.data.length > 0 && (
        <div className="table-wrap" role="region" aria-label="Blacklist" tabIndex={0}>
          <table className="table">
            <caption className="sr-only">Blacklist</caption>
            <thead>
              <tr>
                <th scope="col">Type</th>
                <th scope="col">Value</th>
                <th scope="col">Reason</th>
                <th scope="col">Added</th>
                {isManager(caller) && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {list.data.map((b) => (
                <tr key={b.id}>
                  <td>{b.type.toUpperCase()}</td>
                  <td>
                    <code className="mono">{b.value}</code>
                  </td>
                  <td title={b.reason || undefined}>{b.reason || <span className="muted">none</span>}</td>
                  <td>
                    <Time iso={b.created_at} />
                  </td>
                  {isManager(caller) && (
                    <td>
                      <Button
                        variant="danger"
                        className="small"
                        busy={remove.isPending && remove.variables === b.id}
                        aria-label={`Remove ${b.value}`}
                        onClick={() => remove.mutate(b.id)}
                      >
                        Remove
                      </Button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
