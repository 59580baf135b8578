import { useEffect, useState } from 'react';
import { call, PortalError, type BuyerOrder } from './api.js';
import { when } from './time.js';

/** The page a Stripe Checkout buyer lands on: the keys of the order, while they are kept (30 days). */
export function OrderPage({ id }: { id: string }) {
  const [order, setOrder] = useState<BuyerOrder | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    call<BuyerOrder>('GET', `/api/portal/orders/${encodeURIComponent(id)}`)
      .then(setOrder)
      .catch((e: unknown) => setError(e instanceof PortalError ? e.message : 'The order could not be loaded.'));
  }, [id]);
  return (
    <main className="portal">
      <h1>Your order</h1>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {!order && !error && <p>Loading…</p>}
      {order && (
        <section className="card">
          <h2>{order.product}</h2>
          <p className="muted">Ordered {when(order.created_at)}</p>
          <p>Your license {order.keys.length === 1 ? 'key' : 'keys'}:</p>
          <ul className="keys">
            {order.keys.map((k) => (
              <li key={k}>
                <code>{k}</code>
              </li>
            ))}
          </ul>
          <p className="muted">Keep them safe: this page shows them for 30 days after the order.</p>
        </section>
      )}
    </main>
  );
}
