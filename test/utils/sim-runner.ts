import type { Slice } from '../../runners/batching/dispatcher.js'
import { LatencyModel } from '../../runners/batching/latency-model.js'
import type { FakeClock } from './fake-clock.js'

// Simulated runners for the dispatcher's fake-time tests.

export type Payload = { id: string }

/** A simulated runner: a batch of n rows takes cost(n) ms of fake time; results name their rows. */
export function sliceRunner(clock: FakeClock, cost: (rows: number) => number) {
  const batches: { rows: number; slices: string[]; at: number }[] = []
  const execute = (slices: readonly Slice<Payload>[], rows: number) =>
    new Promise<string[]>((resolve) => {
      batches.push({ rows, slices: slices.map((s) => `${s.payload.id}[${s.start}+${s.rows}]`), at: clock.now() })
      clock.setTimeout(() => resolve(slices.map((s) => `${s.payload.id}:${s.start}-${s.start + s.rows}`)), cost(rows))
    })
  return { batches, execute }
}

/** A trained model: as if the runner had already run batches of every power-of-two size. */
export function trained(cost: (n: number) => number, max: number): LatencyModel {
  const m = new LatencyModel({ reprobeEvery: 1_000_000 })
  for (let n = 1; n <= max; n *= 2) for (let i = 0; i < 5; i++) m.observe(n, cost(n))
  return m
}
