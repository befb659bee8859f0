import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { BundleError } from '../../errors/index.js'
import { envOverrides, mergeOverrides, parseServeConfig } from '../../runners/index.js'

const refuses = (fn: () => unknown, re: RegExp) =>
  assert.throws(fn, (e: BundleError) => e.code === 'E_SERVE_CONFIG_INVALID' && re.test(e.message))

describe('runner overrides (config file and environment)', () => {
  it('parses a serve config and refuses unknown keys by name', () => {
    const cfg = parseServeConfig(
      {
        runners: {
          'ocr-cls': { workers: 2, batching: { maxBatchSize: 16, maxLatencyMs: 30 }, resources: { gpu: 0.5 } },
        },
      },
      'serve.yaml',
    )
    assert.deepEqual(cfg['ocr-cls'], {
      workers: 2,
      batching: { maxBatchSize: 16, maxLatencyMs: 30 },
      resources: { gpu: 0.5 },
    })
    refuses(
      () => parseServeConfig({ runners: { x: { worker: 2 } } }, 'serve.yaml'),
      /serve.yaml: runners.x: unknown key "worker"/,
    )
    refuses(
      () => parseServeConfig({ runners: { x: { batching: { maxBatch: 2 } } } }, 'serve.yaml'),
      /unknown key "maxBatch"/,
    )
    refuses(
      () => parseServeConfig({ runners: { x: { workers: 0 } } }, 'serve.yaml'),
      /workers must be a positive integer/,
    )
    refuses(() => parseServeConfig({ runner: {} }, 'serve.yaml'), /unknown key "runner"/)
  })

  it('reads BUNDLE_RUNNER_<NAME>_<OPTION> and lets it win over the file', () => {
    const env = {
      BUNDLE_RUNNER_OCR_CLS_WORKERS: '3',
      BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_LATENCY_MS: '20',
      BUNDLE_RUNNER_OCR_CLS_GPU: '0,1',
      BUNDLE_RUNNER_OTHER_WORKERS: '9',
    }
    const fromEnv = envOverrides('ocr-cls', env)
    assert.deepEqual(fromEnv, { workers: 3, batching: { maxLatencyMs: 20 }, resources: { gpu: ['0', '1'] } })
    const merged = mergeOverrides(
      { workers: 1, batching: { maxBatchSize: 32, maxLatencyMs: 50 } },
      { workers: 2, batching: { maxBatchSize: 16 } },
      fromEnv,
    )
    assert.deepEqual(merged, {
      workers: 3,
      batching: { maxBatchSize: 16, maxLatencyMs: 20 },
      resources: { gpu: ['0', '1'] },
    })
    refuses(
      () => envOverrides('ocr-cls', { BUNDLE_RUNNER_OCR_CLS_WORKERS: 'many' }),
      /BUNDLE_RUNNER_OCR_CLS_WORKERS="many" is not a number/,
    )
    assert.deepEqual(envOverrides('m', { BUNDLE_RUNNER_M_BATCHING_BATCH_DIM: '1,0', BUNDLE_RUNNER_M_CPU: '2' }), {
      batching: { batchDim: [1, 0] },
      resources: { cpu: 2 },
    })
    assert.deepEqual(envOverrides('m', { BUNDLE_RUNNER_M_BATCHING_BATCH_DIM: '1' }), { batching: { batchDim: 1 } })
    refuses(() => envOverrides('m', { BUNDLE_RUNNER_M_BATCHING_BATCH_DIM: 'x' }), /batchDim must be a dimension index/)
    refuses(
      () => parseServeConfig({ runners: { m: { batching: { batchDim: [1] } } } }, 'serve.yaml'),
      /batchDim must be a dimension index/,
    )
    refuses(
      () => parseServeConfig({ runners: { m: { resources: { cpu: 0 } } } }, 'serve.yaml'),
      /resources.cpu must be a positive number/,
    )
    assert.deepEqual(
      envOverrides('m', {
        BUNDLE_RUNNER_M_MIN_WORKERS: '1',
        BUNDLE_RUNNER_M_MAX_WORKERS: '4',
        BUNDLE_RUNNER_M_IDLE_UNLOAD_MS: '60000',
      }),
      { minWorkers: 1, maxWorkers: 4, idleUnloadMs: 60000 },
    )
    refuses(
      () => parseServeConfig({ runners: { m: { minWorkers: 3, maxWorkers: 2 } } }, 'serve.yaml'),
      /minWorkers 3 is above maxWorkers 2/,
    )
  })

  it(
    'the batch window, the deadline, the queue bound and batches per worker are separate settings; maxLatencyMs ' +
      'still sets the deadline',
    async () => {
      const { resolveBatching } = await import('../../runners/defaults.js')
      const env = {
        BUNDLE_RUNNER_M_DEADLINE_MS: '2500',
        BUNDLE_RUNNER_M_BATCHING_MAX_DELAY_MS: '0',
        BUNDLE_RUNNER_M_BATCHING_MAX_QUEUE_SIZE: '64',
        BUNDLE_RUNNER_M_BATCHES_PER_WORKER: '3',
      }
      const o = envOverrides('m', env)
      assert.deepEqual(o, { deadlineMs: 2500, batchesPerWorker: 3, batching: { maxDelayMs: 0, maxQueueSize: 64 } })
      assert.deepEqual(resolveBatching(o), {
        enabled: true,
        maxBatchSize: 32,
        maxDelayMs: 0,
        deadlineMs: 2500,
        maxQueueSize: 64,
        batchesPerWorker: 3,
        timeoutMs: 30_000,
      })
      // Defaults that serve: a 10 s deadline, a 10 ms window.
      assert.deepEqual(resolveBatching({}), {
        enabled: true,
        maxBatchSize: 32,
        maxDelayMs: 10,
        deadlineMs: 10_000,
        maxQueueSize: 2048,
        batchesPerWorker: 2,
        timeoutMs: 30_000,
      })
      // The old name is the deadline; the new one wins when both are given.
      assert.equal(resolveBatching({ batching: { maxLatencyMs: 50 } }).deadlineMs, 50)
      assert.equal(resolveBatching({ deadlineMs: 80, batching: { maxLatencyMs: 50 } }).deadlineMs, 80)
      assert.equal(resolveBatching({ batching: { maxLatencyMs: 50 } }).maxDelayMs, 10, 'the window is not the deadline')
      refuses(
        () => parseServeConfig({ runners: { m: { batching: { maxDelayMs: -1 } } } }, 'serve.yaml'),
        /maxDelayMs must be a number of milliseconds, 0 or more/,
      )
      refuses(
        () => parseServeConfig({ runners: { m: { deadlineMs: 0 } } }, 'serve.yaml'),
        /deadlineMs must be a positive number/,
      )
      refuses(
        () => parseServeConfig({ runners: { m: { batchesPerWorker: 1.5 } } }, 'serve.yaml'),
        /batchesPerWorker must be a positive integer/,
      )
    },
  )

  it('warmup: false, a mapping of rounds and shapes, or WARMUP_ROUNDS; a mapping merges with the code', () => {
    const cfg = parseServeConfig(
      { runners: { a: { warmup: false }, b: { warmup: { rounds: 3, shapes: { x: [3, 48, 320] } } } } },
      'serve.yaml',
    )
    assert.equal(cfg.a!.warmup, false)
    assert.deepEqual(cfg.b!.warmup, { rounds: 3, shapes: { x: [3, 48, 320] } })
    refuses(
      () => parseServeConfig({ runners: { a: { warmup: { round: 1 } } } }, 'serve.yaml'),
      /warmup: unknown key "round"/,
    )
    refuses(
      () => parseServeConfig({ runners: { a: { warmup: { shapes: { x: [3, -1] } } } } }, 'serve.yaml'),
      /warmup.shapes.x must be a list of sizes/,
    )
    refuses(
      () => parseServeConfig({ runners: { a: { warmup: true } } }, 'serve.yaml'),
      /warmup must be false or a mapping/,
    )
    assert.deepEqual(envOverrides('ocr-cls', { BUNDLE_RUNNER_OCR_CLS_WARMUP_ROUNDS: '0' }), { warmup: { rounds: 0 } })
    const code = { warmup: { shapes: { x: [3, 48, 192] } } }
    assert.deepEqual(mergeOverrides(code, { warmup: { rounds: 2 } }).warmup, { rounds: 2, shapes: { x: [3, 48, 192] } })
    assert.equal(mergeOverrides(code, { warmup: false }).warmup, false)
  })
})
