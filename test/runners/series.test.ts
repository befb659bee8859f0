import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { CounterFamily, GaugeFamily, HistogramFamily } from '../../runners/series.js'

// Plain-number families must expose exactly what prom-client's own metrics expose for the same
// updates: dashboards and alerts read these series.
type Sample = { name: string; labels: Record<string, string>; value: number }
const samples = (text: string): Sample[] =>
  text
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(l)!
      const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]))
      return { name: m[1]!, labels, value: Number(m[3]) }
    })
    .sort((a, b) =>
      (a.name + JSON.stringify(Object.entries(a.labels).sort())).localeCompare(
        b.name + JSON.stringify(Object.entries(b.labels).sort()),
      ),
    )

describe('plain metric families', () => {
  it('expose what prom-client exposes for the same observations, and reset to zero', async () => {
    const theirs = new Registry()
    const ours = new Registry()
    const buckets = [0.001, 0.01, 0.1, 1]
    const h1 = new Histogram({ name: 'x_seconds', help: 'h', labelNames: ['a'], buckets, registers: [theirs] })
    const c1 = new Counter({ name: 'x_total', help: 'c', labelNames: ['a', 'b'], registers: [theirs] })
    const g1 = new Gauge({ name: 'x_now', help: 'g', labelNames: ['a'], registers: [theirs] })
    const h2 = new HistogramFamily('x_seconds', 'h', ours, buckets)
    const c2 = new CounterFamily('x_total', 'c', ours)
    const g2 = new GaugeFamily('x_now', 'g', ours)
    for (const [a, v] of [
      ['p', 0.0005],
      ['p', 0.001],
      ['p', 0.05],
      ['q', 3],
      ['p', 1],
      ['q', 0.2],
    ] as const) {
      h1.observe({ a }, v)
      h2.labels({ a }).observe(v)
      c1.inc({ a, b: 'z' })
      c2.labels({ a, b: 'z' }).value++
      g1.inc({ a })
      g2.labels({ a }).value++
    }
    g1.dec({ a: 'q' })
    g2.labels({ a: 'q' }).value--
    assert.deepEqual(samples(await ours.metrics()), samples(await theirs.metrics()))
    assert.match(await ours.metrics(), /# TYPE x_seconds histogram\n/)
    assert.match(await ours.metrics(), /# TYPE x_total counter\n/)
    assert.match(await ours.metrics(), /# TYPE x_now gauge\n/)
    ours.resetMetrics()
    assert.ok(samples(await ours.metrics()).every((s) => s.value === 0))
  })
})
