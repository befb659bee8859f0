import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ModelCache, type Resident } from '../../../runners/memory/model-cache.js'
import { LruPolicy } from '../../../runners/memory/policy.js'

/** A model the cache manages, whose load and unload a test releases by hand. */
class Model implements Resident {
  loads = 0
  unloads = 0
  loadedNow = false
  working = false
  private gate: { resolve: () => void; reject: (e: Error) => void } | undefined
  constructor(
    readonly fileBytes: number,
    private readonly cost = fileBytes,
    private readonly held = false,
  ) {}
  load(): Promise<number> {
    this.loads++
    if (!this.held) {
      this.loadedNow = true
      return Promise.resolve(this.cost)
    }
    return new Promise((resolve, reject) => {
      this.gate = {
        resolve: () => {
          this.loadedNow = true
          resolve(this.cost)
        },
        reject,
      }
    })
  }
  finish(): void {
    this.gate?.resolve()
  }
  fail(err: Error): void {
    this.gate?.reject(err)
  }
  async unload(): Promise<void> {
    assert.ok(!this.working, 'never unloaded with work in flight')
    this.unloads++
    this.loadedNow = false
  }
  busy(): boolean {
    return this.working
  }
}

const tick = () => new Promise((r) => setImmediate(r))

function cacheOf(capacity: number, models: Record<string, Model>, concurrency = 2) {
  const cache = new ModelCache({ capacity, policy: new LruPolicy(), concurrency })
  for (const [n, m] of Object.entries(models)) cache.add(n, m)
  return cache
}

describe('model cache', () => {
  it('loads on first use, evicts the least recently used to fit, and counts hits as no load', async () => {
    const m = { a: new Model(40), b: new Model(40), c: new Model(40) }
    const cache = cacheOf(100, m)
    for (const n of ['a', 'b', 'a', 'c']) (await cache.acquire(n))()
    assert.equal(cache.loads, 3)
    assert.deepEqual([m.a.loadedNow, m.b.loadedNow, m.c.loadedNow], [true, false, true], 'b was the least recent')
    assert.equal(cache.evictions, 1)
    assert.ok(cache.used() <= cache.capacity)
  })

  it('never evicts a model with a lease or with work queued; a load waits for room instead', async () => {
    const m = { a: new Model(60), b: new Model(60) }
    const cache = cacheOf(100, m)
    const releaseA = await cache.acquire('a')
    let got = false
    const b = cache.acquire('b').then((r) => ((got = true), r))
    await tick()
    assert.equal(got, false, 'b waits: a is in use')
    assert.equal(m.a.unloads, 0)
    m.a.working = true
    releaseA()
    await tick()
    assert.equal(got, false, 'a still has work queued')
    m.a.working = false
    releaseA() // a second release changes nothing; a real runner's queue emptying is a change
    ;(await cache.acquire('a'))() // a use of a (hit) also wakes the waiting load
    const releaseB = await b
    assert.equal(m.a.unloads, 1)
    assert.ok(m.b.loadedNow)
    releaseB()
  })

  it('many requests for one cold model cause one load', async () => {
    const m = { a: new Model(10, 10, true) }
    const cache = cacheOf(100, m)
    const all = Array.from({ length: 8 }, () => cache.acquire('a'))
    await tick()
    m.a.finish()
    for (const r of await Promise.all(all)) r()
    assert.equal(m.a.loads, 1)
  })

  it('more misses at once than fit: each loads in turn, none holds room for another (no deadlock)', async () => {
    const m = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`m${i}`, new Model(40)]))
    const cache = cacheOf(100, m, 2)
    const answered = await Promise.all(
      Object.keys(m).map(async (n) => {
        const release = await cache.acquire(n, performance.now() + 5_000)
        await tick()
        release()
        return n
      }),
    )
    assert.equal(answered.length, 6)
    assert.ok(cache.used() <= 100)
    assert.equal(cache.loads, 6)
  })

  it('runs at most `concurrency` loads at once', async () => {
    const m = { a: new Model(10, 10, true), b: new Model(10, 10, true), c: new Model(10, 10, true) }
    const cache = cacheOf(100, m, 2)
    const all = ['a', 'b', 'c'].map((n) => cache.acquire(n))
    await tick()
    assert.deepEqual([m.a.loads, m.b.loads, m.c.loads], [1, 1, 0])
    m.a.finish()
    await tick()
    await tick()
    assert.equal(m.c.loads, 1, 'c starts once a finishes')
    m.b.finish()
    m.c.finish()
    for (const r of await Promise.all(all)) r()
  })

  it('refuses a model that cannot fit even alone, with a coded error, and loads nothing', async () => {
    const m = { big: new Model(200), a: new Model(10) }
    const cache = cacheOf(100, m)
    ;(await cache.acquire('a'))()
    await assert.rejects(cache.acquire('big'), { code: 'E_MODEL_OVER_BUDGET' })
    assert.equal(m.big.loads, 0)
    assert.ok(m.a.loadedNow, 'nothing evicted for it')
  })

  it('a model measured larger than the budget once loaded goes again, and is refused from then on', async () => {
    const m = { big: new Model(10, 200) }
    const cache = cacheOf(100, m)
    await assert.rejects(cache.acquire('big'), { code: 'E_MODEL_OVER_BUDGET' })
    assert.equal(m.big.loadedNow, false)
    assert.equal(cache.used(), 0)
    await assert.rejects(cache.acquire('big'), { code: 'E_MODEL_OVER_BUDGET' })
    assert.equal(m.big.loads, 1, 'refused without loading it again')
  })

  it('a load past the deadline fails that request only; the load goes on for the others', async () => {
    const m = { a: new Model(60), b: new Model(60) }
    const cache = cacheOf(100, m)
    const releaseA = await cache.acquire('a')
    await assert.rejects(cache.acquire('b', performance.now() + 20), { code: 'E_MODEL_LOAD_TIMEOUT' })
    releaseA()
    ;(await cache.acquire('b'))()
    assert.ok(m.b.loadedNow)
  })

  it('a failed load fails everyone waiting for it, and the next request tries again', async () => {
    const m = { a: new Model(10, 10, true) }
    const cache = cacheOf(100, m)
    const both = [cache.acquire('a'), cache.acquire('a')]
    await tick()
    m.a.fail(new Error('bad file'))
    for (const p of both) await assert.rejects(p, /bad file/)
    assert.equal(m.a.loads, 1)
    const again = cache.acquire('a')
    await tick()
    m.a.finish()
    ;(await again)()
    assert.equal(m.a.loads, 2)
    assert.equal(cache.used(), 10)
  })

  it('measures a model by its load and predicts the next from what loads cost per file byte', async () => {
    const m = { a: new Model(10, 30), b: new Model(20) }
    const cache = cacheOf(1000, m)
    assert.equal(cache.predict('a'), 10, 'before any load: the file size')
    ;(await cache.acquire('a'))()
    assert.equal(cache.predict('a'), 30, 'measured')
    assert.equal(cache.predict('b'), 60, 'three bytes a file byte, as a cost')
  })

  it('pinned models (explicit loads) are never evicted; an explicit unload unpins and unloads', async () => {
    const m = { a: new Model(60), b: new Model(60) }
    const cache = cacheOf(100, m)
    await cache.load('a')
    await assert.rejects(cache.acquire('b', performance.now() + 20), { code: 'E_MODEL_LOAD_TIMEOUT' })
    await cache.unload('a')
    assert.equal(m.a.loadedNow, false)
    ;(await cache.acquire('b'))()
    assert.ok(m.b.loadedNow)
  })

  it('a model lost with its process loads again on its next request', async () => {
    const m = { a: new Model(10) }
    const cache = cacheOf(100, m)
    ;(await cache.acquire('a'))()
    cache.lost('a')
    assert.equal(cache.isLoaded('a'), false)
    ;(await cache.acquire('a'))()
    assert.equal(m.a.loads, 2)
  })
})
