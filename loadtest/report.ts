// The run's report under loadtest-results/: <stamp>-<scenario>.json (everything, machine
// readable), .md (the tables) and .html (the tables and SVG charts, one self-contained file).
// Secrets never go in: no api_secret, token, password or license key.
import fs from 'node:fs';
import path from 'node:path';
import type { CapacityResult } from './capacity.js';
import type { GenResult, Tick } from './generator.js';
import { lineChart } from './report-charts.js';
import type { ServerSample } from './server-metrics.js';

export interface Report {
  tool: 'keywarden loadtest';
  started_at: string;
  finished_at: string;
  machine: string;
  target: { url: string; self_started: boolean; workers?: number; cores?: number };
  scenario: string;
  plan: string;
  command: string;
  app: { api_key: string; beat_interval?: number; test_beat_interval?: number };
  keys: string;
  result: GenResult;
  verify: { share: number; checked: number; bad_signatures: number; bad_proofs: number; kid?: string };
  spike?: { at: number; dropped: number; recovered: number; p50_ms: number; p99_ms: number; max_ms: number };
  capacity?: CapacityResult;
  ticks: Tick[];
  server: ServerSample[];
  server_note?: string;
  notes: string[];
}

const n0 = (v: number | undefined) =>
  v === undefined || !Number.isFinite(v) ? '' : Math.round(v).toLocaleString('en-US');
const n1 = (v: number | undefined) =>
  v === undefined || !Number.isFinite(v)
    ? ''
    : v.toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 });
const ms = (us: number | undefined) => (us === undefined ? '' : us >= 100_000 ? n0(us / 1000) : n1(us / 1000));
const ENDED = {
  duration: 'its duration',
  'max-requests': '--max-requests reached',
  'max-clients': '--max-clients reached',
  signal: 'stopped',
  slo: 'the SLO broke',
} as const;
const pct = (v: number) => `${(v * 100).toFixed(v > 0 && v < 0.001 ? 3 : 2)}%`;

/** Rows of the summary table: [what, value]. */
export function summaryRows(r: Report): [string, string][] {
  const g = r.result;
  const t = g.total;
  const failed = t.non2xx + t.errors + t.prep_fail;
  const rows: [string, string][] = [
    ['Deployment', `${r.target.url}${r.target.self_started ? ' (quick-start server started by the tool)' : ''}`],
    ['Scenario', `${r.scenario}: ${r.plan}`],
    ['Duration', `${n1(g.duration_s)} s measured after the ramp (run ended: ${ENDED[r.capacity?.ended ?? g.stopped]})`],
    ['Clients at the end', n0(g.clients_end)],
    ['Accepted calls a second (after the ramp)', n1(g.ok_rps)],
    [
      'Latency after the ramp, p50 / p90 / p99 / p99.9 / max (ms)',
      [g.p50_us, g.p90_us, g.p99_us, g.p999_us, g.max_us].map(ms).join(' / '),
    ],
    [
      'Calls in the whole run (beats or activations)',
      `${n0(t.calls)} (${n0(t.ok)} accepted; REST ${n0(t.rest_calls)}, channel ${n0(t.ws_calls)})`,
    ],
    [
      'Session preparations (init, license, start, upgrade)',
      `${n0(t.prep)} (${n0(t.prep_fail)} failed), p50 ${ms(t.prep_p50_us)} ms, p99 ${ms(t.prep_p99_us)} ms`,
    ],
    [
      'Failed calls',
      `${n0(failed)} of ${n0(t.calls + t.prep)} (${pct(failed / Math.max(1, t.calls + t.prep))}): ${n0(t.non2xx)} refused, ` +
        `${n0(t.shed)} of them 503, ${n0(t.limited)} 429; ${n0(t.errors)} lost connections; ${n0(t.dead)} clients gave up`,
    ],
    [
      'Verified answers',
      r.verify.share > 0
        ? `${n0(r.verify.checked)} (${pct(r.verify.share)} sampled): ${n0(r.verify.bad_signatures)} bad signatures or MACs, ${n0(r.verify.bad_proofs)} bad proofs`
        : 'off (--verify=0)',
    ],
    ['Generator CPU', `${n1(g.cpu_total_s)} s`],
  ];
  if (r.scenario === 'activate') rows.splice(5, 0, ['Activations (init + license)', n0(t.activations)]);
  if (r.app.beat_interval || r.app.test_beat_interval) {
    rows.splice(2, 0, [
      'Beat interval',
      r.app.test_beat_interval
        ? `${r.app.test_beat_interval} s (--beat-interval; the app's: ${r.app.beat_interval ?? 'unknown'} s)`
        : `${r.app.beat_interval} s (the app's)`,
    ]);
  }
  const cpu = r.server.length ? r.server.reduce((a, s) => a + s.cpu, 0) / r.server.length : undefined;
  if (cpu !== undefined)
    rows.push([
      'Server CPU (from /metrics), mean / max',
      `${n0(cpu * 100)}% / ${n0(Math.max(...r.server.map((s) => s.cpu)) * 100)}% of a core`,
    ]);
  else if (r.server_note) rows.push(['Server CPU', `not measured: ${r.server_note}`]);
  return rows;
}

function capacityMarkdown(c: CapacityResult): string[] {
  const out = [
    '## Capacity search',
    '',
    `SLO: ${c.slo.text} (p${c.slo.percentile} <= ${c.slo.latencyMs} ms, errors <= ${pct(c.slo.errorRate)}, every client held).`,
    '',
    '| Step | Clients | Held | Beats/s | p' + c.slo.percentile + ' ms | Errors | Server CPU | Verdict |',
    '|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const v of c.steps) {
    out.push(
      `| ${v.step + 1} | ${n0(v.clients)} | ${n0(v.held)} | ${n1(v.beatsPerSecond)} | ${n1(v.latencyMs)} | ${n0(v.errors)} of ${n0(v.calls)} ` +
        `(${pct(v.errorRate)}) | ${v.serverCores === undefined ? '' : `${n0(v.serverCores * 100)}%`} | ${v.pass ? 'met' : `broken: ${v.why.join('; ')}`}` +
        `${v.firstTry ? ` (measured twice; the first time: ${v.firstTry})` : ''} |`,
    );
  }
  out.push('');
  if (c.held) {
    out.push(
      `**Held: ${n0(c.held.clients)} clients** (${n0(c.perWorker)} per worker on ${c.workers} worker${c.workers > 1 ? 's' : ''}` +
        `${c.perWorkerAtAppInterval ? `; ${n0(c.perWorkerAtAppInterval)} per worker at the app's ${c.appInterval} s interval` : ''}` +
        `${c.perCore ? `; ${n0(c.perCore)} per core of server CPU in use` : ''}). ` +
        (c.broke
          ? `The SLO broke at ${n0(c.broke.clients)} clients: ${c.broke.why.join('; ')}.`
          : `The SLO never broke: the search ended first (${ENDED[c.ended]}), so the deployment holds at least this many.`),
    );
  } else {
    out.push(
      c.broke
        ? `**The SLO broke at the first step (${n0(c.broke.clients)} clients): ${c.broke.why.join('; ')}.** Start lower (--start, --step).`
        : 'No step completed: lengthen --duration.',
    );
  }
  if (c.table.length) {
    out.push(
      '',
      `Extrapolation at ${Math.round(c.headroom * 100)}% of the measured capacity, ${c.workersPerHost} workers a host:`,
      '',
      '| Clients | Workers | Hosts |',
      '|---:|---:|---:|',
      ...c.table.map((t) => `| ${n0(t.clients)} | ${n0(t.workers)} | ${n0(t.hosts)} |`),
    );
  }
  out.push('', 'Assumptions:', '', ...c.assumptions.map((a) => `- ${a}`));
  return out;
}

export function markdown(r: Report, files: { html: string; json: string }): string {
  const out = [
    `# Load test: ${r.scenario}, ${r.started_at}`,
    '',
    `\`${r.command}\``,
    '',
    '| What | Measured |',
    '|---|---|',
    ...summaryRows(r).map(([k, v]) => `| ${k} | ${v.replace(/\|/g, '\\|')} |`),
    '',
  ];
  if (r.spike) {
    out.push(
      '## Spike',
      '',
      `At ${r.spike.at} s every client (${n0(r.spike.dropped)}) dropped its connection and reconnected at once; ` +
        `${n0(r.spike.recovered)} had their session back (init, license, heartbeat/start, and the upgrade on the channel), ` +
        `p50 ${n1(r.spike.p50_ms)} ms, p99 ${n1(r.spike.p99_ms)} ms, slowest ${n1(r.spike.max_ms)} ms after the drop.`,
      '',
    );
  }
  if (r.capacity) out.push(...capacityMarkdown(r.capacity), '');
  if (r.notes.length) out.push('## Notes', '', ...r.notes.map((x) => `- ${x}`), '');
  out.push(
    `Machine: ${r.machine}. Keys: ${r.keys}. Charts: [${path.basename(files.html)}](${path.basename(files.html)}); ` +
      `every second: [${path.basename(files.json)}](${path.basename(files.json)}).`,
    '',
  );
  return out.join('\n');
}

export function charts(r: Report): string[] {
  const t = r.ticks;
  const spike = r.spike ? { x: r.spike.at, label: 'spike' } : undefined;
  const out = [
    lineChart({
      title:
        r.scenario === 'activate'
          ? 'Latency of init and license calls (each second)'
          : 'Latency of beats (each second)',
      xLabel: 'seconds',
      yLabel: 'ms',
      marker: spike,
      series: [
        { name: 'p50', color: '#2b6cb0', points: t.filter((x) => x.calls).map((x) => [x.t, x.p50_us / 1000]) },
        { name: 'p99', color: '#c05621', points: t.filter((x) => x.calls).map((x) => [x.t, x.p99_us / 1000]) },
      ],
      bound: r.capacity ? { y: r.capacity.slo.latencyMs, label: `SLO p${r.capacity.slo.percentile}` } : undefined,
    }),
    // apart from the calls': thousands of clients preparing at once wait seconds, which would flatten the chart above
    ...(!t.some((x) => x.prep)
      ? []
      : [
          lineChart({
            title: 'Session preparation latency (init, license, heartbeat/start, upgrade)',
            xLabel: 'seconds',
            yLabel: 'ms',
            marker: spike,
            series: [
              {
                name: 'p50',
                color: '#2b6cb0',
                points: t.filter((x) => x.prep).map((x) => [x.t, x.prep_p50_us / 1000]),
              },
              {
                name: 'p99',
                color: '#c05621',
                points: t.filter((x) => x.prep).map((x) => [x.t, x.prep_p99_us / 1000]),
              },
            ],
          }),
        ]),
    lineChart({
      title: 'Throughput (each second)',
      xLabel: 'seconds',
      yLabel: 'calls / s',
      marker: spike,
      series: [
        { name: 'accepted', color: '#2f855a', points: t.map((x) => [x.t, x.ok]) },
        { name: 'preparations', color: '#718096', dashed: true, points: t.map((x) => [x.t, x.prep_ok]) },
        {
          name: 'failed',
          color: '#c53030',
          points: t.map((x) => [x.t, x.non2xx + x.errors + x.prep_fail + x.bad_sig + x.bad_proof]),
        },
      ],
    }),
    lineChart({
      title: 'Clients',
      xLabel: 'seconds',
      yLabel: 'clients',
      marker: spike,
      series: [
        { name: 'with a live session', color: '#2b6cb0', points: t.map((x) => [x.t, x.clients]) },
        { name: 'started', color: '#a0aec0', dashed: true, points: t.map((x) => [x.t, x.target]) },
      ],
    }),
  ];
  if (r.server.length) {
    out.push(
      lineChart({
        title: 'Server CPU (from /metrics)',
        xLabel: 'seconds',
        yLabel: '% of a core',
        marker: spike,
        series: [
          { name: 'all workers', color: '#805ad5', points: r.server.map((s) => [Math.round(s.t), s.cpu * 100]) },
        ],
      }),
    );
  }
  if (r.capacity?.steps.length) {
    const c = r.capacity;
    out.push(
      lineChart({
        title: `Capacity search: p${c.slo.percentile} per step`,
        xLabel: 'clients',
        yLabel: 'ms',
        bound: { y: c.slo.latencyMs, label: `SLO ${c.slo.latencyMs} ms` },
        series: [
          {
            name: `p${c.slo.percentile}`,
            color: '#2b6cb0',
            dots: true,
            points: c.steps.map((v) => [v.clients, v.latencyMs]),
          },
        ],
        dotColor: (_s, i) => (c.steps[i]!.pass ? '#2f855a' : '#c53030'),
      }),
    );
  }
  return out;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Markdown tables and lists of this report's own shape, as HTML. */
function mdToHtml(md: string): string {
  const out: string[] = [];
  let table: string[] = [];
  let list: string[] = [];
  const inline = (s: string) =>
    esc(s)
      .replace(/\*\*(.+?)\*\*/g, '<strong>$1</strong>')
      .replace(/`([^`]+)`/g, '<code>$1</code>')
      .replace(/\[([^\]]+)\]\(([^)]+)\)/g, '<a href="$2">$1</a>')
      .replace(/\\\|/g, '|');
  const flush = () => {
    if (table.length) {
      const cells = (l: string) =>
        l
          .replace(/^\||\|$/g, '')
          .split(/(?<!\\)\|/)
          .map((c) => c.trim());
      const [head, , ...body] = table;
      out.push(
        '<table><thead><tr>',
        ...cells(head!).map((c) => `<th>${inline(c)}</th>`),
        '</tr></thead><tbody>',
        ...body.map(
          (l) =>
            `<tr>${cells(l)
              .map((c) => `<td>${inline(c)}</td>`)
              .join('')}</tr>`,
        ),
        '</tbody></table>',
      );
      table = [];
    }
    if (list.length) {
      out.push('<ul>', ...list.map((l) => `<li>${inline(l)}</li>`), '</ul>');
      list = [];
    }
  };
  for (const line of md.split('\n')) {
    if (line.startsWith('|')) table.push(line);
    else if (line.startsWith('- ')) list.push(line.slice(2));
    else {
      flush();
      if (line.startsWith('# ')) out.push(`<h1>${inline(line.slice(2))}</h1>`);
      else if (line.startsWith('## ')) out.push(`<h2>${inline(line.slice(3))}</h2>`);
      else if (line.trim()) out.push(`<p>${inline(line)}</p>`);
    }
  }
  flush();
  return out.join('\n');
}

export function html(r: Report, md: string): string {
  const [head, ...rest] = md.split('\n## ');
  const tail = rest.length ? `\n## ${rest.join('\n## ')}` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Load test: ${esc(r.scenario)} ${esc(r.started_at)}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 980px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; } td, th { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
code { background: #f4f4f4; padding: 1px 4px; word-break: break-all; } svg { display: block; margin: 1em 0; max-width: 100%; height: auto; }
</style></head><body>
${mdToHtml(head!)}
${charts(r).join('\n')}
${mdToHtml(tail)}
</body></html>
`;
}

/** Writes the three files; returns their paths. */
export function writeReport(r: Report, dir: string): { md: string; json: string; html: string } {
  fs.mkdirSync(dir, { recursive: true });
  const stamp = r.started_at.replace(/[:.]/g, '-');
  const base = path.join(dir, `${stamp}-${r.scenario}${r.capacity ? '-capacity' : ''}`);
  const files = { md: `${base}.md`, json: `${base}.json`, html: `${base}.html` };
  const md = markdown(r, files);
  fs.writeFileSync(files.json, `${JSON.stringify(r, null, 1)}\n`);
  fs.writeFileSync(files.md, md);
  fs.writeFileSync(files.html, html(r, md));
  return files;
}
