// Line charts as inline SVG (no script, no external assets) for the HTML report: latency and
// throughput over time, clients over time, and the capacity search's latency per step.
export interface Series {
  name: string;
  color: string;
  points: [number, number][];
  dashed?: boolean;
  /** draw a dot per point (the capacity steps) */
  dots?: boolean;
}

export interface Chart {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  /** a horizontal line (an SLO bound) */
  bound?: { y: number; label: string };
  /** a vertical line (the spike) */
  marker?: { x: number; label: string };
  /** colours of individual dots, by series index and point index (pass / fail) */
  dotColor?: (series: number, point: number) => string | undefined;
}

const W = 720;
const H = 260;
const M = { l: 60, r: 16, t: 28, b: 40 };

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** 1, 2 or 5 times a power of ten: about `n` steps between 0 and max. */
export function niceStep(max: number, n = 5): number {
  if (!(max > 0)) return 1;
  const raw = max / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

const label = (v: number) =>
  Math.abs(v) >= 1000 ? v.toLocaleString('en-US', { maximumFractionDigits: 0 }) : String(Number(v.toPrecision(3)));

export function lineChart(c: Chart): string {
  const pts = c.series.flatMap((s) => s.points);
  const xMax = Math.max(1, ...pts.map((p) => p[0]), c.marker?.x ?? 0);
  const xMin = Math.min(0, ...pts.map((p) => p[0]));
  const yTop = Math.max(...pts.map((p) => p[1]), c.bound?.y ?? 0, 0) * 1.1 || 1;
  const yStep = niceStep(yTop);
  const yMax = Math.ceil(yTop / yStep) * yStep;
  const xStep = niceStep(xMax - xMin, 8);
  const pw = W - M.l - M.r;
  const ph = H - M.t - M.b;
  const X = (x: number) => M.l + ((x - xMin) / (xMax - xMin || 1)) * pw;
  const Y = (y: number) => M.t + ph - (y / yMax) * ph;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(c.title)}" ` +
      'font-family="system-ui, sans-serif" font-size="11">',
    `<text x="${M.l}" y="16" font-size="13" font-weight="600">${esc(c.title)}</text>`,
  ];
  for (let y = 0; y <= yMax + 1e-9; y += yStep) {
    out.push(
      `<line x1="${M.l}" x2="${W - M.r}" y1="${Y(y)}" y2="${Y(y)}" stroke="#e5e5e5"/>`,
      `<text x="${M.l - 6}" y="${Y(y) + 4}" text-anchor="end" fill="#555">${label(y)}</text>`,
    );
  }
  for (let x = Math.ceil(xMin / xStep) * xStep; x <= xMax + 1e-9; x += xStep) {
    out.push(
      `<line x1="${X(x)}" x2="${X(x)}" y1="${M.t + ph}" y2="${M.t + ph + 4}" stroke="#888"/>`,
      `<text x="${X(x)}" y="${M.t + ph + 16}" text-anchor="middle" fill="#555">${label(x)}</text>`,
    );
  }
  out.push(
    `<line x1="${M.l}" x2="${W - M.r}" y1="${M.t + ph}" y2="${M.t + ph}" stroke="#888"/>`,
    `<text x="${M.l + pw / 2}" y="${H - 6}" text-anchor="middle" fill="#333">${esc(c.xLabel)}</text>`,
    `<text transform="translate(14 ${M.t + ph / 2}) rotate(-90)" text-anchor="middle" fill="#333">${esc(c.yLabel)}</text>`,
  );
  if (c.bound) {
    out.push(
      `<line x1="${M.l}" x2="${W - M.r}" y1="${Y(c.bound.y)}" y2="${Y(c.bound.y)}" stroke="#c00" stroke-dasharray="6 4"/>`,
      `<text x="${W - M.r - 4}" y="${Y(c.bound.y) - 4}" text-anchor="end" fill="#c00">${esc(c.bound.label)}</text>`,
    );
  }
  if (c.marker) {
    out.push(
      `<line x1="${X(c.marker.x)}" x2="${X(c.marker.x)}" y1="${M.t}" y2="${M.t + ph}" stroke="#a50" stroke-dasharray="3 3"/>`,
      `<text x="${X(c.marker.x) + 4}" y="${M.t + 10}" fill="#a50">${esc(c.marker.label)}</text>`,
    );
  }
  c.series.forEach((s, si) => {
    if (s.points.length > 1 && !s.dots) {
      const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
      out.push(
        `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.6"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`,
      );
    }
    if (s.dots || s.points.length === 1) {
      if (s.points.length > 1) {
        const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
        out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1" stroke-opacity="0.5"/>`);
      }
      s.points.forEach((p, pi) =>
        out.push(
          `<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="4" fill="${c.dotColor?.(si, pi) ?? s.color}"/>`,
        ),
      );
    }
  });
  let lx = M.l + 8;
  for (const s of c.series) {
    out.push(
      `<line x1="${lx}" x2="${lx + 18}" y1="${M.t + 6}" y2="${M.t + 6}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`,
      `<text x="${lx + 22}" y="${M.t + 10}" fill="#333">${esc(s.name)}</text>`,
    );
    lx += 30 + s.name.length * 6.5;
  }
  out.push('</svg>');
  return out.join('\n');
}
