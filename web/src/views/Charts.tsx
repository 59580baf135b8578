// Charts of activity over time, drawn with uPlot (a small canvas chart library). uPlot sets styles
// through the DOM (element.style), never as style attributes or <style> elements, and its stylesheet
// is imported here, so it lands in the bundle's CSS file: the dashboard's CSP (style-src 'self')
// holds. Two places use it: a panel on the application page (one chart per metric, scoped like the
// stats) and the Overview page (every application the caller sees, with totals and a small chart).
import { useEffect, useMemo, useRef, useState } from 'react';
import { useQueries, useQuery } from '@tanstack/react-query';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './charts.css';
import { apps as appsApi } from '../api/endpoints.js';
import { METRICS, type Metric } from '../api/responses.js';
import { EmptyState, ErrorState, Loading } from '../components/ui.js';
import { useTitle } from '../hooks/useTitle.js';
import { Link, paths } from '../router.js';

export const METRIC_LABELS: Record<Metric, string> = {
  activations: 'Activations',
  logins: 'Logins',
  beats: 'Heartbeats',
  new_users: 'New users',
};
const METRIC_COLORS: Record<Metric, string> = {
  activations: '#1f4fd1',
  logins: '#067647',
  beats: '#b54708',
  new_users: '#7a2ee0',
};

type Bucket = 'hour' | 'day';
/** The ranges offered: how many buckets back from now. */
const RANGES: { id: string; label: string; bucket: Bucket; count: number }[] = [
  { id: '24h', label: 'Last 24 hours', bucket: 'hour', count: 24 },
  { id: '7dh', label: 'Last 7 days, hourly', bucket: 'hour', count: 7 * 24 },
  { id: '7d', label: 'Last 7 days', bucket: 'day', count: 7 },
  { id: '30d', label: 'Last 30 days', bucket: 'day', count: 30 },
  { id: '90d', label: 'Last 90 days', bucket: 'day', count: 90 },
  { id: '365d', label: 'Last 365 days', bucket: 'day', count: 365 },
];

/** [from, to] for a range: whole buckets, the current one last (so one range keeps one cache key a while). */
function rangeQuery(id: string) {
  const r = RANGES.find((x) => x.id === id) ?? RANGES[3]!;
  const step = r.bucket === 'hour' ? 3_600_000 : 86_400_000;
  const now = Math.floor(Date.now() / step) * step;
  return {
    bucket: r.bucket,
    from: new Date(now - (r.count - 1) * step).toISOString(),
    to: new Date(now).toISOString(),
  };
}

function RangePicker({ value, onChange }: { value: string; onChange: (id: string) => void }) {
  return (
    <label className="chart-range">
      <span>Range</span>
      <select value={value} onChange={(e) => onChange(e.target.value)} name="range">
        {RANGES.map((r) => (
          <option key={r.id} value={r.id}>
            {r.label}
          </option>
        ))}
      </select>
    </label>
  );
}

interface Line {
  metric: Metric;
  values: number[];
}

/**
 * One uPlot chart of `lines` over `t` (ISO bucket starts), as wide as its container. The wrapper
 * carries what was drawn (`data-points`, `data-total`, `data-drawn`) for tests and assistive text.
 */
export function LineChart({
  t,
  lines,
  height,
  label,
  small = false,
}: {
  t: string[];
  lines: Line[];
  height: number;
  label: string;
  small?: boolean;
}) {
  const box = useRef<HTMLDivElement>(null);
  const [drawn, setDrawn] = useState(0);
  const total = lines.reduce((sum, l) => sum + l.values.reduce((a, b) => a + b, 0), 0);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = t.map((iso) => Date.parse(iso) / 1000);
    const opts: uPlot.Options = {
      width: Math.max(120, el.clientWidth),
      height,
      legend: { show: !small },
      cursor: small ? { show: false } : {},
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: small
        ? [{ show: false }, { show: false }]
        : [
            { stroke: '#5b6578', grid: { stroke: '#eef1f6' } },
            { stroke: '#5b6578', grid: { stroke: '#eef1f6' } },
          ],
      series: [
        {},
        ...lines.map((l) => ({
          label: METRIC_LABELS[l.metric],
          stroke: METRIC_COLORS[l.metric],
          width: small ? 1.5 : 2,
          points: { show: false },
        })),
      ],
      hooks: { draw: [() => setDrawn((n) => n + 1)] },
    };
    const u = new uPlot(opts, [xs, ...lines.map((l) => l.values)], el);
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(120, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
    };
  }, [t, lines, height, small]);
  return (
    <figure className={`chart${small ? ' chart-small' : ''}`}>
      <div
        ref={box}
        role="img"
        aria-label={`${label}: ${total} in ${t.length} ${t.length === 1 ? 'bucket' : 'buckets'}`}
        data-points={t.length}
        data-total={total}
        data-drawn={drawn > 0 ? 'true' : 'false'}
      />
    </figure>
  );
}

/** On the application page: one chart per metric, for the chosen range (loaded when opened). */
export function ChartPanel({ appId }: { appId: string }) {
  const [open, setOpen] = useState(false);
  const [range, setRange] = useState('30d');
  const q = rangeQuery(range);
  const series = useQueries({
    queries: METRICS.map((metric) => ({
      queryKey: ['timeseries', appId, metric, q.bucket, q.from, q.to],
      queryFn: () => appsApi.timeseries(appId, { metric, ...q }),
      enabled: open,
    })),
  });
  return (
    <details className="card chart-panel" onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Charts</summary>
      {open && (
        <>
          <div className="chart-controls">
            <RangePicker value={range} onChange={setRange} />
          </div>
          <div className="chart-grid">
            {METRICS.map((metric, i) => {
              const s = series[i]!;
              return (
                <section key={metric} className="chart-card" data-metric={metric} aria-label={METRIC_LABELS[metric]}>
                  <h3>
                    {METRIC_LABELS[metric]}
                    {s.data && <span className="chart-total">{s.data.points.reduce((a, p) => a + p.n, 0)}</span>}
                  </h3>
                  {s.isPending && <Loading label={`Loading ${METRIC_LABELS[metric].toLowerCase()}`} />}
                  {s.isError && <ErrorState error={s.error} retry={() => void s.refetch()} />}
                  {s.data && <SeriesChart metric={metric} points={s.data.points} label={METRIC_LABELS[metric]} />}
                </section>
              );
            })}
          </div>
        </>
      )}
    </details>
  );
}

/** A chart of one metric; its inputs are memoised on the query's data, so it redraws only on new data. */
function SeriesChart({ metric, points, label }: { metric: Metric; points: { t: string; n: number }[]; label: string }) {
  const t = useMemo(() => points.map((p) => p.t), [points]);
  const lines = useMemo(() => [{ metric, values: points.map((p) => p.n) }], [metric, points]);
  return <LineChart t={t} lines={lines} height={180} label={label} />;
}

/** Every application the caller sees: totals per metric and a small chart of each (view_stats). */
export function OverviewView() {
  useTitle('Overview');
  const [range, setRange] = useState('30d');
  const q = rangeQuery(range);
  const overview = useQuery({ queryKey: ['overview', q.bucket, q.from, q.to], queryFn: () => appsApi.overview(q) });
  const data = overview.data;
  return (
    <section aria-labelledby="overview-title">
      <div className="page-head">
        <h1 id="overview-title">Overview</h1>
        <RangePicker value={range} onChange={setRange} />
      </div>
      {overview.isPending && <Loading label="Loading overview" />}
      {overview.isError && <ErrorState error={overview.error} retry={() => void overview.refetch()} />}
      {data && data.apps.length === 0 && (
        <EmptyState title="No applications">There is nothing to chart yet.</EmptyState>
      )}
      {data && data.apps.length > 0 && <OverviewBody data={data} />}
    </section>
  );
}

type OverviewData = Awaited<ReturnType<typeof appsApi.overview>>;

function OverviewBody({ data }: { data: OverviewData }) {
  // Built once per answer: the charts redraw on new data only.
  const shape = useMemo(
    () => ({
      all: METRICS.map((metric) => ({
        metric,
        values: data.t.map((_, i) => data.apps.reduce((sum, a) => sum + (a.series[metric][i] ?? 0), 0)),
      })),
      totals: Object.fromEntries(METRICS.map((m) => [m, data.apps.reduce((sum, a) => sum + a.totals[m], 0)])) as Record<
        Metric,
        number
      >,
      perApp: data.apps.map((a) => METRICS.map((metric) => ({ metric, values: a.series[metric] }))),
    }),
    [data],
  );
  return (
    <>
      <section className="card overview-all" aria-label="All applications">
        <h2>All applications</h2>
        <Totals totals={shape.totals} />
        <LineChart t={data.t} lines={shape.all} height={200} label="All applications" />
      </section>
      <ul className="overview-apps" aria-label="Applications">
        {data.apps.map((a, i) => (
          <li key={a.id} className="card overview-app" data-app={a.id}>
            <h2>
              <Link to={paths.app(a.id)}>{a.name}</Link>
            </h2>
            <Totals totals={a.totals} />
            <LineChart t={data.t} lines={shape.perApp[i]!} height={70} label={a.name} small />
          </li>
        ))}
      </ul>
    </>
  );
}

function Totals({ totals }: { totals: Record<Metric, number> }) {
  return (
    <dl className="mini-stats overview-totals">
      {METRICS.map((m) => (
        <div key={m} data-metric={m}>
          <dt>
            <span className={`swatch swatch-${m}`} aria-hidden="true" />
            {METRIC_LABELS[m]}
          </dt>
          <dd>{totals[m]}</dd>
        </div>
      ))}
    </dl>
  );
}
