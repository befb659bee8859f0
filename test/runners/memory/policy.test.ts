import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { LruPolicy, simulate, TinyLfuPolicy } from '../../../runners/memory/policy.js'
import { parseBytes } from '../../../runners/memory/size.js'

describe('eviction policies', () => {
  it('lru evicts the least recently used first, as many as the room needs', () => {
    const p = new LruPolicy()
    const cs = [
      { name: 'a', bytes: 5, lastUse: 3 },
      { name: 'b', bytes: 5, lastUse: 1 },
      { name: 'c', bytes: 5, lastUse: 2 },
    ]
    assert.deepEqual(p.victims(cs, 1), ['b'])
    assert.deepEqual(p.victims(cs, 6), ['b', 'c'])
    assert.equal(p.victims(cs, 16), undefined, 'not enough even with all of them')
  })

  it('tinylfu keeps a model asked for often over a one-off, among the oldest', () => {
    const p = new TinyLfuPolicy(10)
    for (let i = 0; i < 20; i++) p.record('hot')
    p.record('once')
    const cs = [
      { name: 'hot', bytes: 5, lastUse: 1 },
      { name: 'once', bytes: 5, lastUse: 2 },
    ]
    assert.deepEqual(p.victims(cs, 1), ['once'])
    assert.deepEqual(new LruPolicy().victims(cs, 1), ['hot'], 'where lru would take the older, hot one')
  })

  it('simulates a trace: loads, evictions and the hit rate by bytes', () => {
    const bytes = new Map([
      ['a', 4],
      ['b', 4],
      ['c', 4],
    ])
    // Room for two: a b a c (evicts b) b (evicts a) a (evicts c).
    const r = simulate(['a', 'b', 'a', 'c', 'b', 'a'], bytes, 8, new LruPolicy())
    assert.equal(r.loads, 5)
    assert.equal(r.evictions, 3)
    assert.ok(Math.abs(r.hitRate - 1 / 6) < 1e-9)
    // A model bigger than the whole capacity is never loaded (the server refuses it).
    assert.equal(simulate(['big'], new Map([['big', 9]]), 8, new LruPolicy()).loads, 0)
  })
})

describe('sizes', () => {
  it('reads binary and decimal units, and refuses what is not a size', () => {
    assert.equal(parseBytes('1.5GiB', 'x'), 1.5 * 1024 ** 3)
    assert.equal(parseBytes('800MiB', 'x'), 800 * 1024 ** 2)
    assert.equal(parseBytes('2G', 'x'), 2 * 1024 ** 3)
    assert.equal(parseBytes('500MB', 'x'), 500e6)
    assert.equal(parseBytes('1048576', 'x'), 1048576)
    for (const bad of ['', 'lots', '-1GiB', '0', '1.5 parsecs'])
      assert.throws(() => parseBytes(bad, '--memory-budget'), { code: 'E_SERVE_CONFIG_INVALID' })
  })
})
