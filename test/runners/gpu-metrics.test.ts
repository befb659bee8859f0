import assert from 'node:assert/strict'
import { delimiter } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Registry } from 'prom-client'
import {
  GpuMonitor,
  type GpuPlacement,
  gpuMetricsInterval,
  hasGpu,
  startGpuMonitor,
} from '../../runners/gpu/monitor.js'
import { parseGpuQuery, queryGpus } from '../../runners/gpu/query.js'
import { readFileSync } from 'node:fs'
import pino from 'pino'
import { z } from 'zod'
import { defineApi, defineService, io, onnxRunner, serve } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { runnerWorkers } from '../utils/procs.js'
import { tempDir } from '../utils/tmp.js'

// GPU figures from nvidia-smi, tested with a stand-in nvidia-smi on PATH that prints recorded
// device tables (1, 2 and 4 GPUs, and MIG) and honours the fields asked for, as the real one does.

const STAND_IN = fileURLToPath(new URL('../fixtures/nvidia-smi/', import.meta.url))
const MIB = 1024 * 1024

function withStandIn(fixture: string | undefined): void {
  process.env.PATH = `${STAND_IN}${delimiter}${saved.PATH}`
  if (fixture === undefined) delete process.env.NVIDIA_SMI_FIXTURE
  else process.env.NVIDIA_SMI_FIXTURE = `${STAND_IN}${fixture}`
}
const saved = { PATH: process.env.PATH, NVIDIA_SMI_FIXTURE: process.env.NVIDIA_SMI_FIXTURE }

async function scrape(registry: Registry): Promise<string> {
  return registry.metrics()
}

describe('GPU metrics from nvidia-smi (stand-in device tables)', () => {
  beforeEach(() => withStandIn('one'))
  afterEach(() => {
    process.env.PATH = saved.PATH
    if (saved.NVIDIA_SMI_FIXTURE === undefined) delete process.env.NVIDIA_SMI_FIXTURE
    else process.env.NVIDIA_SMI_FIXTURE = saved.NVIDIA_SMI_FIXTURE
  })

  it('reads 1, 2 and 4 GPUs: utilisation as a ratio, memory in bytes, power in watts', async () => {
    const one = await queryGpus()
    assert.deepEqual(one, [
      {
        index: '0',
        uuid: 'GPU-5f0a3c1e-8d1b-4c7e-9a2f-0b6d4e8c1a01',
        name: 'NVIDIA H200',
        utilization: 0.37,
        memoryUsedBytes: 20480 * MIB,
        memoryTotalBytes: 143771 * MIB,
        powerWatts: 312.45,
        powerLimitWatts: 700,
      },
    ])
    withStandIn('two')
    assert.deepEqual(
      (await queryGpus()).map((g) => [g.index, g.utilization]),
      [
        ['0', 0.91],
        ['1', 0],
      ],
    )
    withStandIn('four')
    const four = await queryGpus()
    assert.equal(four.length, 4)
    // "[N/A]" is no figure, not zero.
    assert.equal(four[3]!.powerWatts, undefined)
    assert.equal(four[3]!.memoryUsedBytes, 0)
    assert.equal(four[2]!.utilization, 1)
  })

  it('MIG: the GPUs are listed; utilisation, which nvidia-smi does not give under MIG, is absent', async () => {
    withStandIn('mig')
    const mig = await queryGpus()
    assert.deepEqual(
      mig.map((g) => [g.index, g.utilization, g.memoryUsedBytes]),
      [
        ['0', undefined, 10240 * MIB],
        ['1', 0.64, 30000 * MIB],
      ],
    )
    assert.equal(await hasGpu(), true)
  })

  it('publishes every figure per GPU, and which runners’ workers run on it', async () => {
    withStandIn('four')
    const registry = new Registry()
    const monitor = new GpuMonitor(registry, 'svc', {
      placements: (): GpuPlacement[] => [
        { runner: 'det', gpus: { '0': 2 } },
        { runner: 'rec', gpus: { '1': 1, '2': 1 } },
      ],
    })
    await monitor.start()
    try {
      const text = await scrape(registry)
      const series = (name: string, gpu: string) => {
        const uuid = `GPU-aaaaaaaa-0000-0000-0000-00000000000${gpu}`
        const labels = `service="svc",gpu="${gpu}",uuid="${uuid}",name="NVIDIA L4"`
        return new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1]
      }
      assert.equal(series('bundle_gpu_utilization_ratio', '1'), '0.55')
      assert.equal(series('bundle_gpu_memory_used_bytes', '1'), String(8192 * MIB))
      assert.equal(series('bundle_gpu_memory_total_bytes', '3'), String(23034 * MIB))
      assert.equal(series('bundle_gpu_power_watts', '2'), '71.8')
      assert.equal(series('bundle_gpu_power_watts', '3'), undefined, 'no series for a figure the GPU does not give')
      assert.equal(series('bundle_gpu_power_limit_watts', '3'), '72')
      assert.match(text, /^bundle_gpu_runner_workers\{service="svc",gpu="0",runner="det"\} 2$/m)
      assert.match(text, /^bundle_gpu_runner_workers\{service="svc",gpu="2",runner="rec"\} 1$/m)
      assert.match(text, /^bundle_gpu_sample_failures_total\{service="svc"\} 0$/m)
    } finally {
      monitor.stop()
    }
  })

  it('a failed sample is counted and told once; the last good figures stay', async () => {
    withStandIn('two')
    const registry = new Registry()
    const told: unknown[] = []
    let fail = false
    const monitor = new GpuMonitor(registry, 'svc', {
      placements: () => [],
      onError: (err) => told.push(err),
      query: () => (fail ? Promise.reject(new Error('nvidia-smi timed out')) : queryGpus()),
    })
    await monitor.start()
    try {
      fail = true
      await (monitor as unknown as { sample(): Promise<void> }).sample()
      await (monitor as unknown as { sample(): Promise<void> }).sample()
      const text = await scrape(registry)
      assert.match(text, /^bundle_gpu_sample_failures_total\{service="svc"\} 2$/m)
      assert.equal(told.length, 1)
      assert.match(text, /^bundle_gpu_utilization_ratio\{service="svc",gpu="0",[^}]*\} 0.91$/m)
    } finally {
      monitor.stop()
    }
  })

  it('starts nothing without a GPU, or with BUNDLE_GPU_METRICS=0', async () => {
    process.env.PATH = '/nonexistent'
    assert.equal(await hasGpu(), false)
    const registry = new Registry()
    assert.equal(await startGpuMonitor(registry, 'svc', { placements: () => [] }), undefined)
    assert.doesNotMatch(await scrape(registry), /bundle_gpu_/)
    withStandIn('one')
    assert.equal(
      await startGpuMonitor(registry, 'svc', { placements: () => [] }, { BUNDLE_GPU_METRICS: '0' }),
      undefined,
    )
    const on = await startGpuMonitor(registry, 'svc', { placements: () => [] }, {})
    assert.ok(on)
    on.stop()
    assert.equal(on.samples()[0]!.name, 'NVIDIA H200')
  })

  it('refuses a sampling interval that is not a number of milliseconds', async () => {
    assert.equal(gpuMetricsInterval({ BUNDLE_GPU_METRICS_INTERVAL_MS: '2000' }), 2000)
    for (const bad of ['', 'soon', '-5', '10'])
      assert.throws(
        () => gpuMetricsInterval({ BUNDLE_GPU_METRICS_INTERVAL_MS: bad }),
        (e: { code?: string }) => e.code === 'E_SERVE_CONFIG_INVALID',
      )
  })

  it('parses only whole lines of the fields it asked for', () => {
    assert.deepEqual(parseGpuQuery('No devices were found\n'), [])
    assert.deepEqual(parseGpuQuery('0, GPU-x, T4, 5\n'), [])
    assert.equal(parseGpuQuery('0, GPU-x, Tesla T4, [Not Supported], 1, 2, 3.5, 70\n')[0]!.utilization, undefined)
  })
})

describe('a server on a (stand-in) GPU machine', () => {
  afterEach(() => {
    process.env.PATH = saved.PATH
    delete process.env.NVIDIA_SMI_FIXTURE
  })

  it('places fractional workers on a device and publishes the GPU figures with them', async () => {
    withStandIn('two')
    const home = tempDir()
    const store = ModelStore.open({ home })
    await store.save({ name: 'ocr-cls', version: '1.0.0', paths: [MODELS.cls] })
    store.close()
    // Two workers at half a GPU each share device 0; onnxruntime runs them on the CPU here (the
    // CUDA provider needs a real GPU: scripts/gpu-check.sh checks that on one).
    const cls = onnxRunner('ocr-cls:1.0.0', {
      home,
      workers: 2,
      resources: { gpu: 0.5 },
      executionProviders: ['cpu'],
      warmup: false,
    })
    const def = defineService({
      name: 'gpu',
      runners: [cls],
      apis: {
        ping: defineApi({ input: io.json(z.object({})), output: io.json(z.object({})), handler: async () => ({}) }),
      },
    })
    const running = await serve(def, { port: 0, handleSignals: false, logger: pino({ level: 'silent' }) })
    try {
      const workers = runnerWorkers('ocr-cls')
      assert.equal(workers.length, 2)
      for (const pid of workers)
        assert.match(readFileSync(`/proc/${pid}/environ`, 'utf8'), /(^|\0)CUDA_VISIBLE_DEVICES=0(\0|$)/)
      const text = await (await fetch(`${running.url}/metrics`)).text()
      assert.match(text, /^bundle_gpu_runner_workers\{service="gpu",gpu="0",runner="ocr-cls"\} 2$/m)
      assert.doesNotMatch(text, /bundle_gpu_runner_workers\{[^}]*gpu="1"/)
      assert.match(text, /^bundle_gpu_utilization_ratio\{service="gpu",gpu="0",[^}]*\} 0.91$/m)
      assert.match(text, /^bundle_gpu_memory_total_bytes\{service="gpu",gpu="1",[^}]*\} 85899345920$/m)
    } finally {
      await running.close()
    }
  })
})
