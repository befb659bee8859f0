import type { Metric, Registry } from 'prom-client'

// Metric families for hot paths: a series is a plain object its owner keeps and updates with
// `+=`. prom-client's own metrics hash the label set on every call, bound children included
// (~0.3 µs each; four of them per API request cost more than validating a small JSON body).
// The registry reads these families at scrape time through the interface it reads its own
// metrics with (get/reset), so /metrics shows them exactly as before.

type Labels = Record<string, string>

interface Value {
  value: number
  labels: Record<string, string | number>
  metricName?: string
}

abstract class Family<S> {
  protected readonly series = new Map<string, { labels: Labels; s: S }>()
  readonly aggregator = 'sum'
  abstract readonly type: string

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry,
  ) {
    // prom-client's registry takes any object with a name, get() and reset(); its typings list its own classes
    // only. test/runners/series.test.ts compares what it then exposes with prom-client's own: an upgrade that
    // changes that contract fails there.
    registry.registerMetric(this as unknown as Metric)
  }

  /** The series for these labels, created at zero on first use: keep it, and update it directly. */
  labels(labels: Labels): S {
    const key = JSON.stringify(labels)
    let e = this.series.get(key)
    if (e === undefined) this.series.set(key, (e = { labels, s: this.fresh() }))
    return e.s
  }

  protected abstract fresh(): S
  protected abstract values(labels: Labels, s: S): Value[]

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    const values: Value[] = []
    for (const { labels, s } of this.series.values()) values.push(...this.values(labels, s))
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values })
  }

  /** Registry.resetMetrics(): every series back to zero (kept, so holders stay attached). */
  reset(): void {
    for (const e of this.series.values()) this.clear(e.s)
  }

  protected abstract clear(s: S): void
}

export interface CounterSeries {
  value: number
}

/** A counter: `series.value += n`. */
export class CounterFamily extends Family<CounterSeries> {
  readonly type: string = 'counter'
  protected fresh(): CounterSeries {
    return { value: 0 }
  }
  protected values(labels: Labels, s: CounterSeries): Value[] {
    return [{ value: s.value, labels }]
  }
  protected clear(s: CounterSeries): void {
    s.value = 0
  }
}

/** A gauge: `series.value` is whatever it is now. */
export class GaugeFamily extends CounterFamily {
  override readonly type: string = 'gauge'
}

export class HistogramSeries {
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  readonly counts: number[]
  sum = 0
  count = 0
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Array<number>(bounds.length + 1).fill(0)
  }

  observe(v: number): void {
    const b = this.bounds
    let i = 0
    while (i < b.length && v > b[i]!) i++
    this.counts[i]!++
    this.sum += v
    this.count++
  }
}

/** A histogram with fixed upper bounds (le); `series.observe(v)`. */
export class HistogramFamily extends Family<HistogramSeries> {
  readonly type = 'histogram'
  constructor(
    name: string,
    help: string,
    registry: Registry,
    private readonly bounds: readonly number[],
  ) {
    super(name, help, registry)
  }
  protected fresh(): HistogramSeries {
    return new HistogramSeries(this.bounds)
  }
  protected values(labels: Labels, s: HistogramSeries): Value[] {
    const out: Value[] = []
    let acc = 0
    this.bounds.forEach((le, i) => {
      acc += s.counts[i]!
      out.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le }, value: acc })
    })
    out.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: s.count })
    out.push(
      { metricName: `${this.name}_sum`, labels, value: s.sum },
      { metricName: `${this.name}_count`, labels, value: s.count },
    )
    return out
  }
  protected clear(s: HistogramSeries): void {
    s.counts.fill(0)
    s.sum = 0
    s.count = 0
  }
}
