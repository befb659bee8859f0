import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { BundleError } from '../../errors/index.js'
import { envOverrides, mergeOverrides, parseServeConfig } from '../../runners/index.js'

const refuses = (fn: () => unknown, re: RegExp) => assert.throws(fn, (e: BundleError) => e.code === 'E_SERVE_CONFIG_INVALID' && re.test(e.message))

describe('runner overrides (config file and environment)', () => {
  it('parses a serve config and refuses unknown keys by name', () => {
    const cfg = parseServeConfig({ runners: { 'ocr-cls': { workers: 2, batching: { maxBatchSize: 16, maxLatencyMs: 30 }, resources: { gpu: 0.5 } } } }, 'serve.yaml')
    assert.deepEqual(cfg['ocr-cls'], { workers: 2, batching: { maxBatchSize: 16, maxLatencyMs: 30 }, resources: { gpu: 0.5 } })
    refuses(() => parseServeConfig({ runners: { x: { worker: 2 } } }, 'serve.yaml'), /serve.yaml: runners.x: unknown key "worker"/)
    refuses(() => parseServeConfig({ runners: { x: { batching: { maxBatch: 2 } } } }, 'serve.yaml'), /unknown key "maxBatch"/)
    refuses(() => parseServeConfig({ runners: { x: { workers: 0 } } }, 'serve.yaml'), /workers must be a positive integer/)
    refuses(() => parseServeConfig({ runner: {} }, 'serve.yaml'), /unknown key "runner"/)
  })

  it('reads BUNDLE_RUNNER_<NAME>_<OPTION> and lets it win over the file', () => {
    const env = { BUNDLE_RUNNER_OCR_CLS_WORKERS: '3', BUNDLE_RUNNER_OCR_CLS_BATCHING_MAX_LATENCY_MS: '20', BUNDLE_RUNNER_OCR_CLS_GPU: '0,1', BUNDLE_RUNNER_OTHER_WORKERS: '9' }
    const fromEnv = envOverrides('ocr-cls', env)
    assert.deepEqual(fromEnv, { workers: 3, batching: { maxLatencyMs: 20 }, resources: { gpu: ['0', '1'] } })
    const merged = mergeOverrides({ workers: 1, batching: { maxBatchSize: 32, maxLatencyMs: 50 } }, { workers: 2, batching: { maxBatchSize: 16 } }, fromEnv)
    assert.deepEqual(merged, { workers: 3, batching: { maxBatchSize: 16, maxLatencyMs: 20 }, resources: { gpu: ['0', '1'] } })
    refuses(() => envOverrides('ocr-cls', { BUNDLE_RUNNER_OCR_CLS_WORKERS: 'many' }), /BUNDLE_RUNNER_OCR_CLS_WORKERS="many" is not a number/)
  })
})
