// Addresses checked in the form before anything is sent (the server checks again: a webhook must
// also resolve to a public address, which only it can tell). Blank is always allowed: it clears.

function parse(value: string): URL | null {
  try {
    return new URL(value);
  } catch {
    return null;
  }
}

function hostProblem(url: URL): string | undefined {
  if (url.username || url.password) return 'Leave the user name and password out of the address.';
  if (!url.hostname) return 'The address needs a host name, such as example.com.';
  return undefined;
}

/** An update download address: http or https. */
export function updateUrlProblem(value: string): string | undefined {
  const v = value.trim();
  if (v === '') return undefined;
  const url = parse(v);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:'))
    return 'Enter a full web address, such as https://example.com/download.';
  return hostProblem(url);
}

/** A webhook: https only (docs/protocol.md 11.14). */
export function webhookProblem(value: string): string | undefined {
  const v = value.trim();
  if (v === '') return undefined;
  const url = parse(v);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:'))
    return 'Enter a full https:// address, such as https://example.com/hooks/keywarden.';
  if (url.protocol !== 'https:') return 'Webhooks are sent over https only: the address must start with https://.';
  return hostProblem(url);
}
