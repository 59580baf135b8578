// Products (docs/protocol.md 14.4-14.7): what a shop sells, the webhook URLs and secret to paste into Stripe
// or the shop, and the orders fulfilled, with their keys' previews (the plaintext is the buyer's).
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { products as productsApi, type Product } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { Button, CopyButton, EmptyState, ErrorState, Field, FormError, Loading, Time } from '../components/ui.js';

const UNITS = ['days', 'weeks', 'months', 'hours', 'lifetime'] as const;

function ProductCard({ p, onChanged }: { p: Product; onChanged: () => void }) {
  const [reveal, setReveal] = useState(false);
  const stripeUrl = `${window.location.origin}${p.stripe_webhook_path}`;
  const dynamicUrl = `${window.location.origin}${p.dynamic_webhook_path}`;
  const rotate = useMutation({ mutationFn: () => productsApi.rotateSecret(p.id), onSuccess: onChanged });
  const remove = useMutation({ mutationFn: () => productsApi.remove(p.id), onSuccess: onChanged });
  return (
    <li className="card">
      <h3>{p.name}</h3>
      <dl className="creds">
        <dt>Keys</dt>
        <dd>
          {p.unit === 'lifetime' ? 'Lifetime' : `${p.duration} ${p.unit}`}, level {p.level}, mask{' '}
          <code className="mono">{p.mask}</code>
        </dd>
        {p.entitlements.length > 0 && (
          <>
            <dt>Entitlements</dt>
            <dd>{p.entitlements.join(', ')}</dd>
          </>
        )}
        <dt>Stripe webhook URL</dt>
        <dd>
          <code className="mono">{stripeUrl}</code> <CopyButton text={stripeUrl} label="Copy Stripe webhook URL" />
        </dd>
        <dt>Dynamic delivery URL</dt>
        <dd>
          <code className="mono">{dynamicUrl}</code> <CopyButton text={dynamicUrl} label="Copy dynamic delivery URL" />
        </dd>
        <dt>Webhook secret</dt>
        <dd>
          <code className="mono">{reveal ? p.webhook_secret : '•'.repeat(24)}</code>{' '}
          <Button variant="ghost" onClick={() => setReveal(!reveal)} aria-pressed={reveal}>
            {reveal ? 'Hide' : 'Reveal'}
          </Button>
          <CopyButton text={p.webhook_secret} label="Copy webhook secret" />
        </dd>
      </dl>
      <div className="row">
        <Button onClick={() => rotate.mutate()} busy={rotate.isPending}>
          Rotate secret
        </Button>
        <Button variant="ghost" onClick={() => remove.mutate()} busy={remove.isPending}>
          Delete product
        </Button>
      </div>
    </li>
  );
}

function CreateProduct({ app, onCreated }: { app: App; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [duration, setDuration] = useState('30');
  const [unit, setUnit] = useState<(typeof UNITS)[number]>('days');
  const [level, setLevel] = useState('1');
  const [mask, setMask] = useState('');
  const [entitlements, setEntitlements] = useState('');
  const create = useMutation({
    mutationFn: () =>
      productsApi.create(app.id, {
        name,
        unit,
        level: Number(level),
        ...(unit === 'lifetime' ? {} : { duration: Number(duration) }),
        ...(mask ? { mask } : {}),
        entitlements: entitlements
          .split(',')
          .map((e) => e.trim())
          .filter(Boolean),
      }),
    onSuccess: () => {
      setName('');
      onCreated();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };
  return (
    <form className="card" onSubmit={submit} aria-labelledby="new-product">
      <h2 id="new-product">New product</h2>
      <Field label="Name">
        {(p) => <input {...p} value={name} onChange={(e) => setName(e.target.value)} required />}
      </Field>
      <Field label="Duration">
        {(p) => (
          <input
            {...p}
            type="number"
            min={1}
            value={duration}
            disabled={unit === 'lifetime'}
            onChange={(e) => setDuration(e.target.value)}
          />
        )}
      </Field>
      <Field label="Unit">
        {(p) => (
          <select {...p} value={unit} onChange={(e) => setUnit(e.target.value as (typeof UNITS)[number])}>
            {UNITS.map((u) => (
              <option key={u} value={u}>
                {u}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Level">
        {(p) => <input {...p} type="number" min={1} value={level} onChange={(e) => setLevel(e.target.value)} />}
      </Field>
      <Field label="Mask" hint="Empty: the generator's default mask">
        {(p) => <input {...p} value={mask} onChange={(e) => setMask(e.target.value)} />}
      </Field>
      <Field label="Entitlements" hint="Codes, separated by commas">
        {(p) => <input {...p} value={entitlements} onChange={(e) => setEntitlements(e.target.value)} />}
      </Field>
      <FormError error={create.error} fields={['name', 'duration', 'unit', 'level', 'mask', 'entitlements']} />
      <Button type="submit" variant="primary" busy={create.isPending}>
        Create product
      </Button>
    </form>
  );
}

export function ProductsTab({ app }: { app: App }) {
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['products', app.id], queryFn: () => productsApi.list(app.id) });
  const orders = useQuery({ queryKey: ['orders', app.id], queryFn: () => productsApi.orders(app.id) });
  const refresh = () => void qc.invalidateQueries({ queryKey: ['products', app.id] });
  return (
    <div className="stack">
      <CreateProduct app={app} onCreated={refresh} />
      <section aria-labelledby="products-title">
        <h2 id="products-title">Products</h2>
        {list.isPending && <Loading label="Loading products" />}
        {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
        {list.data?.length === 0 && <EmptyState title="No products yet" />}
        <ul className="product-list">
          {list.data?.map((p) => (
            <ProductCard key={p.id} p={p} onChanged={refresh} />
          ))}
        </ul>
      </section>
      <section className="card" aria-labelledby="orders-title">
        <h2 id="orders-title">Orders</h2>
        {orders.isPending && <Loading label="Loading orders" />}
        {orders.isError && <ErrorState error={orders.error} retry={() => void orders.refetch()} />}
        {orders.data?.length === 0 && <EmptyState title="No orders yet" />}
        {orders.data && orders.data.length > 0 && (
          <table className="table">
            <thead>
              <tr>
                <th>When</th>
                <th>Product</th>
                <th>Order</th>
                <th>Email</th>
                <th>Keys</th>
              </tr>
            </thead>
            <tbody>
              {orders.data.map((o) => (
                <tr key={o.id}>
                  <td>
                    <Time iso={o.created_at} />
                  </td>
                  <td>{o.product_name}</td>
                  <td>
                    {o.provider} <code className="mono">{o.external_id}</code>
                  </td>
                  <td>{o.email}</td>
                  <td>
                    {o.keys.map((k) => (
                      <code key={k.license_id} className="mono">
                        {k.key_preview ?? 'deleted'}{' '}
                      </code>
                    ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </div>
  );
}
