import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { Registry } from 'prom-client'
import { BundleError } from '../../errors/index.js'
import { join } from 'node:path'
import { z } from 'zod'
import { createServiceApp, defineApi, defineService, io, onnxRunner } from '../../framework/index.js'
import { metricsCompat, registerTritonMetrics } from '../../framework/server/triton-metrics.js'
import { Dispatcher } from '../../runners/batching/dispatcher.js'
import type { BatchStages } from '../../runners/batching/options.js'
import { type InferenceModel, RunnerStats } from '../../runners/index.js'
import { bothObservers } from '../../runners/stats.js'
import { FakeClock } from '../utils/fake-clock.js'
import { parsePrometheus } from '../utils/prom.js'
import { type Payload, trained } from '../utils/sim-runner.js'
import { tempDir } from '../utils/tmp.js'
import { saveNegModel } from '../utils/v2-models.js'

// `--metrics-compat triton` in parts: where a batch's time goes (dispatcher, fake time), how the
// statistics add it up per request as Triton does, the nv_inference_* families read from them, and
// the setting itself. test/ops/triton-metrics.test.ts runs it all on a real server and Prometheus.

const silent = pino({ level: 'silent' })

/** Fake time that also moves while a batch's inputs are handed over (synchronously, inside execute). */
class SteppedClock extends FakeClock {
  extra = 0
  override now(): number {
    return super.now() + this.extra
  }
}

const model = (name: string, version: string, stats: RunnerStats, pending?: number) =>
  ({ name, version, stats, ...(pending === undefined ? {} : { pending: () => pending }) }) as unknown as InferenceModel

describe('Triton metrics: the measurements', () => {
  it('a batch splits into input (handing it to the worker), compute (as the worker measured) and output', async () => {
    const clock = new SteppedClock()
    const seen: { rows: number; waited: readonly number[]; ms: number; stages?: BatchStages }[] = []
    const d = new Dispatcher<Payload, string>(
      {
        maxBatchSize: 4,
        maxLatencyMs: 1000,
        slots: 1,
        clock,
        model: trained(() => 9, 4),
        observer: {
          batch: (rows, waited, ms, ok, stages) => void (ok && seen.push({ rows, waited, ms, stages })),
          rejected: () => undefined,
        },
      },
      (slices, _rows, report) => {
        clock.extra += 2 // inputs copied and sent: 2 ms before execute's first wait
        return new Promise((resolve) =>
          clock.setTimeout(() => {
            report(5) // the worker's own measure of the run
            resolve(slices.map((s) => s.payload.id))
          }, 9),
        )
      },
    )
    const answers = Promise.all([d.submit({ id: 'a' }, 1), d.submit({ id: 'b' }, 2)])
    await clock.advance(1000)
    assert.deepEqual(await answers, [['a'], ['b']])
    assert.ok(seen.length >= 1)
    for (const b of seen) {
      assert.equal(b.ms, 11, 'execution: 2 ms handing over + 9 ms until the answer')
      assert.deepEqual(b.stages, { inputMs: 2, computeMs: 5, outputMs: 4 })
    }
    assert.equal(
      seen.reduce((n, b) => n + b.rows, 0),
      3,
    )
  })

  it("statistics count each request in a batch with the batch's stages, successes only; failures by reason", () => {
    const s = new RunnerStats()
    const o = s.observer()
    // Two requests (waited 1 and 4 ms) in one batch of 3 rows; a failed batch adds no stage time.
    o.batch(3, [1, 4], 11, true, { inputMs: 2, computeMs: 5, outputMs: 4 })
    o.batch(1, [7], 3, false)
    // Without stages (a runner that cannot split its time) the whole execution is compute.
    o.batch(1, [0.5], 6, true)
    assert.deepEqual(s.stages, { queueNs: 5.5e6, inputNs: 4e6, inferNs: 16e6, outputNs: 8e6 })
    assert.equal(s.executionCount, 2)
    s.request(true, 2, 20)
    s.request(true, 1, 30)
    s.request(false, 1, 1, new BundleError('E_RUNNER_OVERLOADED', 'shed'))
    s.request(false, 1, 1, new BundleError('E_HTTP_CLIENT_CLOSED', 'gone'))
    s.request(false, 1, 1, Object.assign(new Error('aborted'), { name: 'AbortError' }))
    s.request(false, 1, 1, new Error('onnxruntime: invalid dimensions')) // uncoded: from the model run
    s.request(false, 1, 1, new BundleError('E_RUNNER_CRASHED', 'worker died'))
    s.request(false, 0, 1, new BundleError('E_INPUT_INVALID', 'bad shape'))
    assert.deepEqual(s.failures, { REJECTED: 1, CANCELED: 2, BACKEND: 2, OTHER: 1 })
    assert.equal(s.fail.count, 6)
    assert.equal(s.inferenceCount, 3)
    // The runner hands its batcher both observers: each sees every event, cancellations included.
    const cancelled: number[] = []
    const both = bothObservers(
      { batch: () => undefined, rejected: () => undefined, cancelled: (rows) => void cancelled.push(rows) },
      s.observer(),
    )
    both.cancelled?.(2)
    both.batch(2, [1], 4, true, { inputMs: 1, computeMs: 2, outputMs: 1 })
    assert.deepEqual(cancelled, [2])
    assert.equal(s.executionCount, 3)
  })
})

describe('Triton metrics: the series', () => {
  it("Triton's names, types, labels and units, read from the statistics, one set per model version", async () => {
    const registry = new Registry()
    const a = new RunnerStats()
    a.observer().batch(3, [1, 4], 11, true, { inputMs: 2, computeMs: 5, outputMs: 4 })
    a.request(true, 2, 20)
    a.request(true, 1, 30)
    a.request(false, 0, 1, new BundleError('E_INPUT_INVALID', 'bad shape'))
    const b = new RunnerStats()
    let models = [model('neg', '1', a, 3), model('ens', '2.0.0', b), model('neg', '1', a, 3)]
    registerTritonMetrics(registry, () => models)
    const text = await registry.metrics()
    const samples = parsePrometheus(text)
    const value = (name: string, labels: Record<string, string>) => {
      const found = samples.filter(
        (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
      )
      assert.equal(found.length, 1, `${name} ${JSON.stringify(labels)}: ${JSON.stringify(found)}`)
      return found[0]!.value
    }
    const neg = { model: 'neg', version: '1' }
    assert.equal(value('nv_inference_request_success', neg), 2)
    assert.equal(value('nv_inference_request_failure', { ...neg, reason: 'OTHER' }), 1)
    for (const reason of ['REJECTED', 'CANCELED', 'BACKEND'])
      assert.equal(value('nv_inference_request_failure', { ...neg, reason }), 0, 'every reason from the start')
    assert.equal(value('nv_inference_count', neg), 3)
    assert.equal(value('nv_inference_exec_count', neg), 1)
    assert.equal(value('nv_inference_request_duration_us', neg), 50_000)
    assert.equal(value('nv_inference_queue_duration_us', neg), 5_000)
    assert.equal(value('nv_inference_compute_input_duration_us', neg), 4_000)
    assert.equal(value('nv_inference_compute_infer_duration_us', neg), 10_000)
    assert.equal(value('nv_inference_compute_output_duration_us', neg), 8_000)
    assert.equal(value('nv_inference_pending_request_count', neg), 3)
    assert.equal(value('nv_inference_pending_request_count', { model: 'ens', version: '2.0.0' }), 0)
    assert.equal(value('nv_inference_request_success', { model: 'ens', version: '2.0.0' }), 0)
    // Counters named as Triton names them (no _total), the pending count a gauge; every label set model+version.
    for (const name of [
      'nv_inference_request_success',
      'nv_inference_request_failure',
      'nv_inference_count',
      'nv_inference_exec_count',
      'nv_inference_request_duration_us',
      'nv_inference_queue_duration_us',
      'nv_inference_compute_input_duration_us',
      'nv_inference_compute_infer_duration_us',
      'nv_inference_compute_output_duration_us',
    ])
      assert.match(text, new RegExp(`^# TYPE ${name} counter$`, 'm'))
    assert.match(text, /^# TYPE nv_inference_pending_request_count gauge$/m)
    for (const s of samples) {
      const keys = Object.keys(s.labels).sort().join(',')
      assert.equal(keys, s.name === 'nv_inference_request_failure' ? 'model,reason,version' : 'model,version', s.name)
    }
    // An unloaded model leaves the scrape.
    models = [model('ens', '2.0.0', b)]
    assert.ok(!parsePrometheus(await registry.metrics()).some((s) => s.labels.model === 'neg'))
  })

  it('the setting: triton or none, from the option else BUNDLE_METRICS_COMPAT; anything else is refused', () => {
    assert.equal(metricsCompat('triton', {}), 'triton')
    assert.equal(metricsCompat(' Triton ', {}), 'triton')
    assert.equal(metricsCompat(undefined, { BUNDLE_METRICS_COMPAT: 'triton' }), 'triton')
    assert.equal(metricsCompat('none', { BUNDLE_METRICS_COMPAT: 'triton' }), undefined, 'the option wins')
    assert.equal(metricsCompat(undefined, {}), undefined)
    assert.equal(metricsCompat(undefined, { BUNDLE_METRICS_COMPAT: '' }), undefined)
    const refused = (value: string | undefined, env: NodeJS.ProcessEnv, re: RegExp) =>
      assert.throws(
        () => metricsCompat(value, env),
        (e: BundleError) => e.code === 'E_SERVE_CONFIG_INVALID' && e.exitCode === 2 && re.test(e.message),
      )
    refused('prometheus', {}, /^--metrics-compat "prometheus" is not a metrics set .*use triton/)
    refused(undefined, { BUNDLE_METRICS_COMPAT: 'nvidia' }, /^BUNDLE_METRICS_COMPAT "nvidia" is not/)
  })

  it('a server without the setting has no nv_ series; with it, the families are there before any request', async () => {
    const def = defineService({
      name: 'plain',
      apis: { ping: defineApi({ input: io.text(), output: io.text(), handler: async (t) => t }) },
    })
    const saved = process.env.BUNDLE_METRICS_COMPAT
    delete process.env.BUNDLE_METRICS_COMPAT
    try {
      const off = createServiceApp(def, { logger: silent })
      assert.doesNotMatch(await (await off.app.request('/metrics')).text(), /nv_/)
      const on = createServiceApp(def, { logger: silent, metricsCompat: 'triton' })
      assert.match(await (await on.app.request('/metrics')).text(), /^# TYPE nv_inference_request_success counter$/m)
      assert.throws(
        () => createServiceApp(def, { logger: silent, metricsCompat: 'bogus' as 'triton' }),
        (e: BundleError) => e.code === 'E_SERVE_CONFIG_INVALID',
      )
    } finally {
      if (saved !== undefined) process.env.BUNDLE_METRICS_COMPAT = saved
    }
  })

  it("a service API's runner calls count for the runner's model, as /v2 calls do", { timeout: 120_000 }, async () => {
    const home = join(tempDir(), 'home')
    await saveNegModel(home, '3.1.0')
    const neg = onnxRunner('neg:3.1.0', { home, workers: 1 })
    const def = defineService({
      name: 'negate',
      runners: [neg],
      apis: {
        negate: defineApi({
          input: io.json(z.object({ rows: z.array(z.tuple([z.number(), z.number()])) })),
          output: io.json(z.object({ rows: z.array(z.array(z.number())) })),
          handler: async ({ rows }) => {
            const x = { dtype: 'float32' as const, shape: [rows.length, 2], data: Float32Array.from(rows.flat()) }
            const { y } = await neg.run({ x })
            const out = Array.from(y!.data as Float32Array)
            return { rows: rows.map((_, i) => out.slice(2 * i, 2 * i + 2)) }
          },
        }),
      },
    })
    const svc = createServiceApp(def, { logger: silent, metricsCompat: 'triton' })
    await svc.start()
    try {
      for (const rows of [
        [[1, 2]],
        [
          [3, 4],
          [5, 6],
        ],
      ]) {
        const r = await svc.app.request('/negate', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ rows }),
        })
        assert.equal(r.status, 200, await r.text())
      }
      const m = parsePrometheus(await (await svc.app.request('/metrics')).text())
      const at = (name: string) =>
        m.find((s) => s.name === name && s.labels.model === 'neg' && s.labels.version === '3.1.0')?.value
      assert.equal(at('nv_inference_request_success'), 2)
      assert.equal(at('nv_inference_count'), 3)
      assert.ok(at('nv_inference_exec_count')! >= 1)
      assert.ok(at('nv_inference_compute_infer_duration_us')! > 0)
    } finally {
      await svc.stop()
    }
  })
})
