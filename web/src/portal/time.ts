/** A timestamp in the customer's own locale and time zone; `—` when there is none. */
export function when(iso: string | null): string {
  if (!iso) return '—';
  return new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(iso));
}
