import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import { accessLog } from '../../framework/server/access-log.js'

// The access line the server puts together itself must be the line pino would have written
// (log shippers parse it), and must follow the logger's level.
describe('access log', () => {
  const collect = () => {
    const lines: string[] = []
    return { lines, write: (l: string) => (lines.push(l), true) }
  }
  const untimed = (l: string) => l.replace(/"time":\d+/, '"time":0')

  it('writes byte for byte what pino writes, escaping what JSON needs', () => {
    const viaPino = collect()
    const own = collect()
    const log = pino({ level: 'info', base: { service: 'svc "quoted"' } }, viaPino)
    const line = accessLog(log, own, 'svc "quoted"')
    for (const [method, path, status, ms, id] of [
      ['POST', '/greet', 200, 0.12, 'f0c3a3c2-1e0b-4e0c-9a5b-1d7a3c2b1f00'],
      ['GET', '/odd"path\\with/ünïcode', 404, 12, 'client-id:7@x'],
    ] as const) {
      log.info({ method, path, status, ms, requestId: id }, 'request')
      line(method, path, status, ms, id)
    }
    assert.equal(own.lines.length, 2)
    assert.deepEqual(own.lines.map(untimed), viaPino.lines.map(untimed))
    const parsed = JSON.parse(own.lines[1]!) as { path: string; time: number }
    assert.equal(parsed.path, '/odd"path\\with/ünïcode')
    assert.ok(Math.abs(parsed.time - Date.now()) < 60_000)
  })

  it('writes nothing while the level is above info, and again once it is lowered', () => {
    const own = collect()
    const log = pino({ level: 'warn' }, collect())
    const line = accessLog(log, own, 's')
    line('POST', '/a', 200, 1, 'id')
    assert.equal(own.lines.length, 0)
    log.level = 'info'
    line('POST', '/a', 200, 1, 'id')
    assert.equal(own.lines.length, 1)
  })

  it('goes through the logger itself when the app does not own it', () => {
    const viaPino = collect()
    const log = pino({ base: null }, viaPino)
    accessLog(log, undefined, 's')('POST', '/a', 503, 2.5, 'id')
    assert.deepEqual(JSON.parse(viaPino.lines[0]!), {
      level: 30,
      time: (JSON.parse(viaPino.lines[0]!) as { time: number }).time,
      method: 'POST',
      path: '/a',
      status: 503,
      ms: 2.5,
      requestId: 'id',
      msg: 'request',
    })
  })
})
