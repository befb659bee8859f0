// test-slot: exclusive (it measures latency or throughput on the machine's cores: see scripts/test-slot.mjs)
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { status as Status } from '@grpc/grpc-js'
import pino from 'pino'
import { onnxRunner, serve, type RunningServer } from '../../framework/index.js'
import { ModelStore } from '../../store/index.js'
import { grpcError, inferenceClient, type Grpc } from '../utils/grpc.js'
import { MODELS } from '../utils/models.js'
import { runnerWorkers } from '../utils/procs.js'
import { tempDir } from '../utils/tmp.js'
import { runnersService } from '../utils/v2-models.js'
import { until } from '../utils/until.js'

// gRPC under load and faults, on the real text recogniser (a batch takes long enough to
// queue behind): client deadlines reach the batcher, a full queue is UNAVAILABLE, a worker
// killed under a stream fails that stream's requests and leaves the stream usable, and
// shutdown ends open streams instead of waiting out the grace period.

const WIDTH = 1280

/** CPU ticks a process has used (utime + stime): rises while a worker runs a batch. */
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return Number(fields[11]) + Number(fields[12])
}

describe('gRPC under load and faults (ocr-rec)', () => {
  let running: RunningServer
  let client: Grpc
  const home = join(tempDir(), 'home')

  const recRequest = (id: string, model = 'ocr-rec') => ({
    model_name: model,
    id,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, WIDTH] }],
    raw_input_contents: [Buffer.alloc(3 * 48 * WIDTH * 4)],
  })

  before(async () => {
    const store = ModelStore.open({ home })
    await store.save({ name: 'ocr-rec', version: '1.0.0', paths: [MODELS.rec] })
    store.close()
    running = await serve(
      runnersService('grpc-load', [
        onnxRunner('ocr-rec:1.0.0', {
          home,
          workers: 1,
          deadlineMs: 60_000,
          batching: { maxBatchSize: 1, maxQueueSize: 10 },
        }),
      ]),
      {
        port: 0,
        grpcPort: 0,
        logger: pino({ level: 'silent' }),
        handleSignals: false,
        storeHome: home,
        graceMs: 60_000,
      },
    )
    client = inferenceClient(running.grpcUrl!)
    await until('ready', async () => (await client.call('ServerReady', {})).ready === true, 60_000)
    // Measured batches: admission then knows how long one takes.
    for (let i = 0; i < 3; i++) await client.call('ModelInfer', recRequest(`warm${i}`))
  })
  after(async () => {
    client?.close()
    await running?.close() // the last test closes it; close() is idempotent
  })

  it('a client deadline shorter than the work ahead: DEADLINE_EXCEEDED from the batcher, not its timer', async () => {
    const stats = (await client.call('ModelStatistics', { name: 'ocr-rec' })).model_stats[0]
    const batchMs = Number(stats.inference_stats.compute_infer.ns) / Number(stats.execution_count) / 1e6
    // Six or more batches queued ahead; the deadline gives it a third of that time. The server
    // refuses it on arrival: long before the client's own timer would end the call.
    // Ten blockers (two run, eight wait: the queue holds ten, so the late one still fits), so
    // that six are queued even where a busy machine sends them slowly.
    const blockers = Array.from({ length: 10 }, (_, i) => client.call('ModelInfer', recRequest(`blocker${i}`)))
    let queued = 0
    await until('the blockers are queued', async () => {
      const [r] = (await (await fetch(`${running.url}/runners`)).json()) as { batcher: { queuedRequests: number } }[]
      queued = r!.batcher.queuedRequests
      return queued >= 6
    })
    const deadlineMs = Math.max(200, Math.round((batchMs * queued) / 3))
    const started = performance.now()
    const err = await grpcError(client.call('ModelInfer', recRequest('late'), { deadlineMs }), Status.DEADLINE_EXCEEDED)
    assert.equal(err.metadata.get('error-code')[0], 'E_RUNNER_OVERLOADED', `the server refused it: ${err.details}`)
    assert.match(err.details, /before its deadline/)
    assert.ok(performance.now() - started < deadlineMs, 'refused before the deadline')
    // Given the time, the same request is served.
    const patient = client.call('ModelInfer', recRequest('patient'), { deadlineMs: 60_000 })
    await Promise.all(blockers)
    assert.equal((await patient).id, 'patient')
  })

  it('a full queue answers UNAVAILABLE with the code and a retry-after trailer', async () => {
    const calls = Array.from({ length: 30 }, (_, i) =>
      client.call('ModelInfer', recRequest(`q${i}`)).then(
        () => 'ok',
        (e) => e,
      ),
    )
    const outcomes = await Promise.all(calls)
    const refused = outcomes.filter((o) => o !== 'ok')
    assert.ok(refused.length >= 1, 'thirty at once overflow a queue of ten')
    assert.ok(outcomes.includes('ok'))
    for (const e of refused) {
      assert.equal(e.code, Status.UNAVAILABLE, e.details)
      assert.equal(e.metadata.get('error-code')[0], 'E_RUNNER_OVERLOADED')
      assert.equal(e.metadata.get('retry-after')[0], '1')
    }
  })

  it('a worker killed under a stream: its request fails UNAVAILABLE, the stream goes on', async () => {
    const stream = client.stream()
    const answers: any[] = []
    const ended = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: any) => answers.push(m))
      stream.on('end', resolve)
      stream.on('error', reject)
    })
    const [worker] = runnerWorkers('ocr-rec')
    assert.ok(worker, 'the runner has a worker process')
    const ticks = cpuTicks(worker)
    // Three requests one batch each: whichever runs when the kill lands fails.
    for (let i = 0; i < 3; i++) stream.write(recRequest(`doomed${i}`))
    // Kill it while it runs a batch (its CPU time moving says it does).
    await until('the worker runs a batch', () => cpuTicks(worker) > ticks + 2, 30_000)
    process.kill(worker, 'SIGKILL')
    await until('the three are answered on the stream', () => answers.length === 3, 60_000)
    const failed = answers.filter((a) => a.error_message !== '')
    assert.ok(failed.length >= 1, 'the batch running when the worker died failed')
    for (const a of failed) {
      assert.match(a.infer_response.id, /^doomed\d$/)
      assert.equal(a.infer_response.parameters.grpc_status.string_param, 'UNAVAILABLE')
      assert.equal(a.infer_response.parameters.error_code.string_param, 'E_RUNNER_CRASHED')
      assert.match(a.error_message, /worker/)
    }
    // The same stream, once a new worker is up.
    await until(
      'a new worker is ready',
      async () => (await client.call('ModelReady', { name: 'ocr-rec' })).ready,
      60_000,
    )
    stream.write(recRequest('after'))
    stream.end()
    await ended
    assert.equal(answers.length, 4)
    assert.equal(answers[3].infer_response.id, 'after')
    assert.equal(answers[3].error_message, '')
    assert.equal(answers[3].infer_response.outputs[0].datatype, 'FP32')
  })

  it('shutdown answers what an open stream has in flight, then ends it, not after the grace period', async () => {
    const stream = client.stream()
    const answers: any[] = []
    const ended = new Promise<string>((resolve) => {
      stream.on('end', () => resolve('end'))
      stream.on('error', (e: any) => resolve(`error ${e.code}`))
      stream.on('data', (m: any) => answers.push(m))
    })
    stream.write(recRequest('first'))
    await until('the stream is open on the server', () => answers.length === 1, 30_000)
    const [worker] = runnerWorkers('ocr-rec')
    const ticks = cpuTicks(worker!)
    stream.write(recRequest('in-flight'))
    await until('its batch runs', () => cpuTicks(worker!) > ticks + 2, 30_000)
    const started = performance.now()
    await running.close()
    assert.equal(await ended, 'end')
    assert.deepEqual(
      answers.map((a) => [a.infer_response.id, a.error_message]),
      [
        ['first', ''],
        ['in-flight', ''],
      ],
    )
    assert.ok(performance.now() - started < 30_000, 'well inside the 60 s grace period')
  })
})
