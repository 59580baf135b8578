// The relay's status page: what an administrator on the customer's network checks in a browser.
import type { Lease } from './lease-store.js';

const esc = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function statusPage(s: {
  seats: number;
  in_use: number;
  valid_until: string;
  license_id: string;
  now: number;
  leases: readonly Lease[];
}): string {
  const rows = [...s.leases]
    .sort((a, b) => a.hwid.localeCompare(b.hwid))
    .slice(0, 1000)
    .map((l) => `<tr><td>${esc(l.hwid)}</td><td>${new Date(l.expiresAt).toISOString()}</td></tr>`)
    .join('');
  const expired = Date.parse(s.valid_until) <= s.now;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><meta http-equiv="refresh" content="30">
<title>Keywarden relay</title><style>
body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:48rem;padding:0 1rem;color:#1d2430}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #dde}
.big{font-size:2rem;font-weight:600}.warn{color:#b42318}</style></head><body>
<h1>Keywarden relay</h1>
<p class="big">${s.in_use} / ${s.seats} seats in use</p>
<p>License <code>${esc(s.license_id)}</code>. Pool valid until <strong class="${expired ? 'warn' : ''}">${esc(
    s.valid_until,
  )}</strong>${expired ? ' (expired: no new leases)' : ''}.</p>
<h2>Leases</h2>
<table><thead><tr><th>HWID</th><th>Expires</th></tr></thead>
<tbody>${rows || '<tr><td colspan="2">None</td></tr>'}</tbody></table>
</body></html>`;
}
