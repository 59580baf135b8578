// The webhook delivery log (docs/api.md "Webhooks"): every attempt made to the account's webhook in
// the last 30 days, newest first, with what came back; any delivery can be sent again.
import { useState } from 'react';
import { useInfiniteQuery, useMutation, useQueryClient } from '@tanstack/react-query';
import { webhooks as webhooksApi } from '../api/endpoints.js';
import type { WebhookDelivery } from '../api/responses.js';
import { Badge, Button, EmptyState, ErrorState, Loading, Time } from '../components/ui.js';
import { useNotice } from '../notices.js';

const PAGE = 50;

function outcome(d: WebhookDelivery) {
  if (d.status !== null && d.status >= 200 && d.status < 300) return <Badge tone="green">{d.status}</Badge>;
  if (d.status !== null) return <Badge tone="red">{d.status}</Badge>;
  return <Badge tone="red">no answer</Badge>;
}

function host(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

export function DeliveriesCard() {
  const notice = useNotice();
  const qc = useQueryClient();
  const [open, setOpen] = useState<string | null>(null);
  const list = useInfiniteQuery({
    queryKey: ['webhook-deliveries'],
    queryFn: ({ pageParam }) => webhooksApi.deliveries({ limit: PAGE, ...(pageParam ? { before: pageParam } : {}) }),
    initialPageParam: '',
    getNextPageParam: (last) => (last.length === PAGE ? last[last.length - 1]!.id : undefined),
  });
  const redeliver = useMutation({
    mutationFn: webhooksApi.redeliver,
    onSuccess: (d) => {
      notice(d.error === null && d.status !== null && d.status < 300 ? 'ok' : 'error', redeliveredText(d));
      void qc.invalidateQueries({ queryKey: ['webhook-deliveries'] });
    },
  });
  const rows = list.data?.pages.flat() ?? [];
  return (
    <section className="card card-wide" aria-labelledby="deliveries-title">
      <div className="card-head">
        <h2 id="deliveries-title">Webhook deliveries</h2>
        <Button onClick={() => void list.refetch()} busy={list.isRefetching} busyLabel="Refreshing">
          Refresh
        </Button>
      </div>
      <p className="muted small">Every attempt of the last 30 days, newest first. Failed ones are retried 3 times.</p>
      {list.isPending && <Loading label="Loading deliveries" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && rows.length === 0 && <EmptyState title="No deliveries yet" />}
      {rows.length > 0 && (
        <div className="table-wrap" role="region" aria-label="Webhook deliveries" tabIndex={0}>
          <table className="table">
            <caption className="sr-only">Webhook deliveries</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Event</th>
                <th scope="col">Attempt</th>
                <th scope="col">Answer</th>
                <th scope="col">Took</th>
                <th scope="col">Sent to</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((d) => (
                <tr key={d.id} data-testid="delivery-row">
                  <td>
                    <Time iso={d.at} />
                  </td>
                  <td>
                    <code>{d.event}</code>
                  </td>
                  <td>{d.attempt}</td>
                  <td>
                    {outcome(d)}
                    {d.error && <div className="muted small">{d.error}</div>}
                    {d.response_excerpt && (
                      <details open={open === d.id} onToggle={(e) => e.currentTarget.open && setOpen(d.id)}>
                        <summary className="small">Response</summary>
                        <pre className="small excerpt">{d.response_excerpt}</pre>
                      </details>
                    )}
                  </td>
                  <td>{d.latency_ms.toLocaleString()} ms</td>
                  <td title={d.url}>{host(d.url)}</td>
                  <td>
                    <Button
                      onClick={() => redeliver.mutate(d.id)}
                      busy={redeliver.isPending && redeliver.variables === d.id}
                      busyLabel="Sending"
                      aria-label={`Redeliver ${d.event} of ${new Date(d.at).toLocaleString()}`}
                    >
                      Redeliver
                    </Button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {list.hasNextPage && (
        <div className="actions">
          <Button onClick={() => void list.fetchNextPage()} busy={list.isFetchingNextPage} busyLabel="Loading">
            Older deliveries
          </Button>
        </div>
      )}
    </section>
  );
}

function redeliveredText(d: WebhookDelivery): string {
  if (d.status !== null) return `Sent again: the receiver answered ${d.status}`;
  return `Sent again: ${d.error ?? 'no answer'}`;
}
