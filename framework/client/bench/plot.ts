import type { BenchRow } from './report.js'

// The sweep as a picture: goodput (x) against p99 latency (y), one point a step, labelled with
// its concurrency or rate — where the curve turns up is where the deployment stops scaling.
// A self-contained HTML page with an inline SVG: no script, no network, opens anywhere.

const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!)

/** Round tick steps (1, 2, 5 × 10^k) covering 0..max in about five ticks. */
function ticks(max: number): number[] {
  if (!(max > 0)) return [0, 1]
  const raw = max / 5
  const p = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw)!
  const out: number[] = []
  for (let v = 0; v <= max + step / 2; v += step) out.push(Math.round(v * 1e6) / 1e6)
  if (out[out.length - 1]! < max) out.push(out[out.length - 1]! + step)
  return out
}

export function plotHtml(rows: readonly BenchRow[], title: string): string {
  const W = 760
  const H = 460
  const m = { l: 70, r: 30, t: 50, b: 60 }
  const xt = ticks(Math.max(...rows.map((r) => r.stats.goodput), 0))
  const yt = ticks(Math.max(...rows.map((r) => r.stats.p99), 0))
  const xmax = xt[xt.length - 1]!
  const ymax = yt[yt.length - 1]!
  const x = (v: number) => m.l + (v / xmax) * (W - m.l - m.r)
  const y = (v: number) => H - m.b - (v / ymax) * (H - m.t - m.b)
  const label = (v: number) => (rows[0]?.load.mode === 'rate' ? `${v}/s` : `c=${v}`)
  const pts = rows.map((r) => [x(r.stats.goodput), y(r.stats.p99)] as const)
  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15">${esc(title)}</text>`,
    ...xt.map(
      (t) =>
        `<line x1="${x(t)}" y1="${m.t}" x2="${x(t)}" y2="${H - m.b}" stroke="#eee"/>` +
        `<text x="${x(t)}" y="${H - m.b + 18}" text-anchor="middle">${t}</text>`,
    ),
    ...yt.map(
      (t) =>
        `<line x1="${m.l}" y1="${y(t)}" x2="${W - m.r}" y2="${y(t)}" stroke="#eee"/>` +
        `<text x="${m.l - 8}" y="${y(t) + 4}" text-anchor="end">${t}</text>`,
    ),
    `<line x1="${m.l}" y1="${H - m.b}" x2="${W - m.r}" y2="${H - m.b}" stroke="#333"/>`,
    `<line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${H - m.b}" stroke="#333"/>`,
    `<text x="${(m.l + W - m.r) / 2}" y="${H - 16}" text-anchor="middle">goodput (2xx answers per second)</text>`,
    `<text transform="translate(18 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle">p99 latency (ms)</text>`,
    `<polyline fill="none" stroke="#2563eb" stroke-width="2" points="${pts.map((p) => p.join(',')).join(' ')}"/>`,
    ...rows.map(
      (r, i) =>
        `<circle cx="${pts[i]![0]}" cy="${pts[i]![1]}" r="4" fill="${r.stable ? '#2563eb' : '#dc2626'}">` +
        `<title>${label(r.load.value)}: ${r.stats.goodput.toFixed(1)}/s, p99 ${r.stats.p99.toFixed(2)} ms` +
        `${r.stable ? '' : ' (not stable)'}</title></circle>` +
        `<text x="${pts[i]![0] + 6}" y="${pts[i]![1] - 6}" fill="#555">${label(r.load.value)}</text>`,
    ),
    '</svg>',
  ]
  return (
    `<!doctype html>\n<html><head><meta charset="utf-8"><title>${esc(title)}</title></head>\n<body>\n` +
    `${svg.join('\n')}\n<p style="font-family:sans-serif;font-size:12px;color:#555">Red points did not ` +
    'settle (their last three windows differed by more than 10%).</p>\n</body></html>\n'
  )
}
