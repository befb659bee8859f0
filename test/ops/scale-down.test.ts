import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type RoundRobinProxy, startProxy } from '../utils/round-robin-proxy.js'
import { serveReady, type Served } from '../utils/serve.js'
import { until } from '../utils/until.js'

// An autoscaler removing a replica under load, as Kubernetes does it: the pod leaves the Service's
// endpoints (here: a round-robin proxy's list, a moment late, as endpoint changes reach proxies
// asynchronously) while its preStop hook waits; then it gets SIGTERM, keeps answering through the
// drain delay and finishes what it holds — here, requests it took before leaving, still running when
// SIGTERM lands. Not one request may fail, and the replica must shut down through its hooks.

const SLOW = fileURLToPath(new URL('../fixtures/slow-service.ts', import.meta.url))
const PRESTOP_MS = 1_500
const ENDPOINT_LAG_MS = 300
const DRAIN_DELAY_MS = 1_000

describe('scale-down under load: endpoint removal, preStop, SIGTERM, drain', () => {
  const stops: (() => Promise<void>)[] = []
  after(async () => {
    for (const s of stops.reverse()) await s()
  })

  it('every request is answered 200 while a replica leaves; it finishes what it took and shuts down', {
    timeout: 120_000,
  }, async () => {
    const env = { BUNDLE_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS) }
    const [a, b] = (await Promise.all([serveReady(SLOW, [], env), serveReady(SLOW, [], env)])) as [Served, Served]
    stops.push(a.stop, b.stop)
    const proxy: RoundRobinProxy = await startProxy()
    stops.push(proxy.close)
    proxy.setBackends([a.url, b.url])

    // 12 clients through the proxy, each sending again once answered.
    const outcomes: string[] = []
    let loading = true
    const send = (url: string, ms: number) =>
      fetch(`${url}/sleep`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ms }),
      }).then(
        async (res) => (await res.text(), String(res.status)),
        (e: Error) => `error ${(e.cause as Error | undefined)?.message ?? e.message}`,
      )
    const client = async () => {
      while (loading) outcomes.push(await send(proxy.url, 20 + Math.floor(Math.random() * 200)))
    }
    const clients = Array.from({ length: 12 }, client)
    await until('replica b answers some requests', async () => (proxy.stats().answered[b.url] ?? 0) >= 20, 30_000)

    // Requests b took before it left, long enough to be running at SIGTERM: the drain must finish them.
    const longMs = PRESTOP_MS + 1_500
    const long = Array.from({ length: 3 }, () => send(b.url, longMs).then((o) => ({ o, at: Date.now() })))
    // Scale-down of b: preStop starts; the endpoint change lands a little later.
    const prestop = new Promise((r) => setTimeout(r, PRESTOP_MS))
    await new Promise((r) => setTimeout(r, ENDPOINT_LAG_MS))
    proxy.setBackends([a.url])
    await prestop
    const sigterm = Date.now()
    await b.stop('SIGTERM')
    const afterExit = proxy.stats()
    // Load keeps going on a for another second, then stops.
    await new Promise((r) => setTimeout(r, 1_000))
    loading = false
    await Promise.all(clients)
    const longDone = await Promise.all(long)

    assert.deepEqual(
      longDone.map((l) => l.o),
      ['200', '200', '200'],
      'the requests running on b at SIGTERM were finished',
    )
    assert.ok(
      longDone.every((l) => l.at > sigterm),
      'they were still running when SIGTERM landed',
    )
    assert.equal(afterExit.inFlight[b.url], 0)
    const bad = outcomes.filter((o) => o !== '200')
    assert.deepEqual(bad, [], `${bad.length} of ${outcomes.length} requests through the proxy failed`)
    assert.ok(outcomes.length > 100, `only ${outcomes.length} requests`)
    assert.ok(/"msg":"shutdown hook ran"/.test(b.output()), 'b shut down through its hooks')
  })
})
