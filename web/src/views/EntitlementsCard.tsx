// The entitlement catalogue editor (docs/protocol.md 12.3): one `code Name` per line; saving replaces the
// catalogue, and a code removed from it leaves every key that had it.
import { useEffect, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi } from '../api/endpoints.js';
import { Button, Field, FormError, fieldError } from '../components/ui.js';
import { useNotice } from '../notices.js';

const asText = (list: { code: string; name: string }[]) =>
  list.map((e) => (e.name ? `${e.code} ${e.name}` : e.code)).join('\n');

/** Lines `code Name` (the name is optional) as catalogue entries. */
export function parseCatalogue(text: string): { code: string; name: string }[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [code, ...rest] = l.split(/\s+/);
      return { code: code!, name: rest.join(' ') };
    });
}

export function EntitlementsCard({ appId }: { appId: string }) {
  const qc = useQueryClient();
  const notice = useNotice();
  const catalogue = useQuery({ queryKey: ['entitlements', appId], queryFn: () => appsApi.entitlements(appId) });
  const [text, setText] = useState('');
  useEffect(() => {
    if (catalogue.data) setText(asText(catalogue.data.entitlements));
  }, [catalogue.data]);
  const save = useMutation({
    mutationFn: () => appsApi.setEntitlements(appId, parseCatalogue(text)),
    onSuccess: (saved) => {
      qc.setQueryData(['entitlements', appId], saved);
      void qc.invalidateQueries({ queryKey: ['licenses', appId] });
      notice('ok', 'Entitlements saved');
    },
  });
  const dirty = catalogue.data !== undefined && text !== asText(catalogue.data.entitlements);
  return (
    <section className="card" aria-labelledby="entitlements-title">
      <h2 id="entitlements-title">Entitlements</h2>
      <form
        noValidate
        aria-label="Entitlement catalogue"
        onSubmit={(e) => {
          e.preventDefault();
          save.mutate();
        }}
      >
        <Field
          label="Catalogue"
          error={fieldError(save.error, 'entitlements')}
          hint="One per line: a code (a-z, 0-9, _ . -) and a name. Keys carry codes; clients see them sorted. Removing a code takes it off every key."
        >
          {(p) => (
            <textarea
              {...p}
              name="entitlements"
              className="mono"
              rows={4}
              placeholder={'pro Pro features\nexport Export'}
              value={text}
              onChange={(e) => setText(e.target.value)}
            />
          )}
        </Field>
        <FormError error={save.error} fields={['entitlements']} />
        <div className="actions">
          <Button type="submit" variant="primary" busy={save.isPending} busyLabel="Saving" disabled={!dirty}>
            Save entitlements
          </Button>
        </div>
      </form>
    </section>
  );
}
