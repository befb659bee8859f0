// test-slot: exclusive (it measures latency or throughput on the machine's cores: see scripts/test-slot.mjs)
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { ModelStore } from '../../store/index.js'
import { MODELS } from '../utils/models.js'
import { openLoop, percentile, type Answer } from '../utils/open-loop.js'
import { rssMiB, runnerWorkers } from '../utils/procs.js'
import { parsePrometheus } from '../utils/prom.js'
import { serveReady } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'

// Offered load at three times what the server can do, over a real socket into a real worker
// process running a real model. Accepted requests must still meet the latency bound, the rest
// must be refused at once (not queued until they time out), and memory must stay flat.

const BOUND_MS = 500 // the fixture's batching.maxLatencyMs
const body = new Uint8Array(new Float32Array(3 * 48 * 320).fill(0.5).buffer)
const headers = { 'content-type': 'application/octet-stream', 'x-tensor-shape': '1,3,48,320' }

/** Closed loop: what the server serves per second when clients wait for each answer. */
async function capacity(url: string, concurrency: number, ms: number): Promise<number> {
  let ok = 0
  const end = performance.now() + ms
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const r = await fetch(`${url}/read`, { method: 'POST', headers, body })
        await r.arrayBuffer()
        if (r.status === 200) ok++
      }
    }),
  )
  return ok / (ms / 1000)
}

const summary = (answers: Answer[]) => {
  const by: Record<string, number> = {}
  for (const a of answers)
    by[`${a.status}${a.code ? ` ${a.code}` : ''}`] = (by[`${a.status}${a.code ? ` ${a.code}` : ''}`] ?? 0) + 1
  return JSON.stringify(by)
}

describe('overload', () => {
  it('at 3× capacity: every request answered, accepted p99 within the bound, the rest shed at once, memory flat', {
    timeout: 180_000,
  }, async () => {
    const home = join(tempDir(), 'home')
    const store = ModelStore.open({ home })
    await store.save({ name: 'ocr-rec', version: '4.0.0', paths: [MODELS.rec] })
    store.close()
    const s = await serveReady('test/fixtures/rec-service.ts', [], { BUNDLE_HOME: home })
    try {
      const [worker] = runnerWorkers('ocr-rec', s.pid)
      assert.ok(worker)
      await capacity(s.url, 4, 1500) // warm-up: the batcher learns how long batches take
      const served = await capacity(s.url, 8, 4000)
      assert.ok(served > 5, `the server serves something: ${served.toFixed(1)} req/s`)
      const rssBefore = { server: rssMiB(s.pid), worker: rssMiB(worker!) }

      let peakRss = { server: 0, worker: 0 }
      let peakQueue = 0
      let sampling = true
      const sampler = (async () => {
        while (sampling) {
          peakRss = {
            server: Math.max(peakRss.server, rssMiB(s.pid)),
            worker: Math.max(peakRss.worker, rssMiB(worker!)),
          }
          const metrics = parsePrometheus(await (await fetch(`${s.url}/metrics`)).text())
          peakQueue = Math.max(
            peakQueue,
            ...metrics.filter((m) => m.name === 'bundle_runner_queue_depth').map((m) => m.value),
          )
          await new Promise((r) => setTimeout(r, 250)) // the sampling period: peaks, not a sync point
        }
      })()
      const rate = 3 * served
      const { sent, answers } = await openLoop({
        url: `${s.url}/read`,
        headers,
        body,
        rate,
        durationMs: 15_000,
        timeoutMs: 15_000,
      })
      sampling = false
      await sampler

      const ok = answers.filter((a) => a.status === 200)
      const shed = answers.filter((a) => a.status === 503 || a.status === 429)
      const report =
        `offered ${rate.toFixed(0)} req/s (capacity ${served.toFixed(1)}), ${sent} sent: ${summary(answers)}; ` +
        `accepted p50 ${percentile(
          ok.map((a) => a.ms),
          50,
        ).toFixed(0)} ` +
        `p99 ${percentile(
          ok.map((a) => a.ms),
          99,
        ).toFixed(0)} ms; ` +
        `shed p50 ${percentile(
          shed.map((a) => a.ms),
          50,
        ).toFixed(0)} ` +
        `p99 ${percentile(
          shed.map((a) => a.ms),
          99,
        ).toFixed(0)} ms, ` +
        `${shed.filter((a) => a.ms > 50).length} after 50 ms; ` +
        `accepted over the bound: ${ok.filter((a) => a.ms > BOUND_MS).length}; ` +
        `rss ${JSON.stringify(rssBefore)} → peak ${JSON.stringify(peakRss)} MiB; peak queue ${peakQueue} rows`
      console.log(report)

      assert.equal(answers.length, sent, 'every request sent was answered')
      assert.deepEqual(
        answers.filter((a) => a.status <= 0),
        [],
        `no connection errors, nothing hung: ${report}`,
      )
      assert.deepEqual(
        answers.filter((a) => a.status !== 200 && a.status !== 503 && a.status !== 429),
        [],
        `only 200, 503 and 429: ${report}`,
      )
      for (const a of shed)
        assert.ok(
          a.code === 'E_RUNNER_OVERLOADED' || a.code === 'E_HTTP_TOO_MANY_REQUESTS',
          `a coded shed answer: ${a.code}`,
        )
      assert.ok(shed.length >= sent * 0.4, `at 3× capacity most of the excess is shed: ${report}`)
      assert.ok(
        ok.length / 15 >= served * 0.6,
        `goodput holds under overload (no collapse): ${(ok.length / 15).toFixed(1)} req/s of ` +
          `${served.toFixed(1)}; ${report}`,
      )
      // The server holds accepted requests to the bound on its own clock; what this process
      // measures adds the socket and its own turn on a 2-core machine that may be busy with
      // another job. The failure this guards against — accepted requests left queued for
      // seconds — lies far beyond twice the bound (bench:overload reports the tight figure).
      assert.ok(
        percentile(
          ok.map((a) => a.ms),
          99,
        ) <=
          2 * BOUND_MS,
        `accepted p99 within twice the ${BOUND_MS} ms bound: ${report}`,
      )
      // Most are refused on arrival; the few admitted on an optimistic estimate that then could
      // not make it are refused before they run — within the bound, never after it.
      assert.ok(
        percentile(
          shed.map((a) => a.ms),
          50,
        ) <= 50,
        `shed answers come at once: ${report}`,
      )
      assert.ok(
        percentile(
          shed.map((a) => a.ms),
          99,
        ) <=
          2 * BOUND_MS,
        `no shed answer comes much later than the bound: ${report}`,
      )
      // Admission, not the memory cap (64 × maxBatchSize = 128 rows), is what bounds the queue:
      // about one latency bound of work (≈ 20 rows here).
      assert.ok(peakQueue <= 40, `the queue holds about one bound of work, far below its memory cap: ${peakQueue} rows`)
      assert.ok(
        peakRss.server - rssBefore.server < 100 && peakRss.worker - rssBefore.worker < 100,
        `memory stays bounded: ${report}`,
      )
      // And it recovers at once when the load stops.
      const after = await fetch(`${s.url}/read`, { method: 'POST', headers, body })
      assert.equal(after.status, 200)
    } finally {
      await s.stop('SIGTERM')
    }
  })
})
