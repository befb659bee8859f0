import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { serveReady, type Served } from '../utils/serve.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'

// A server loads the libraries of optional protocols only when it uses them: BullMQ and ioredis
// (remote runners, @task), gRPC, ws (WebSocket routes), sigstore-js (signed models). Loaded, each
// is heap every full GC marks and start-up time every server pays (docs/defaults.md).
const PRELOAD = fileURLToPath(new URL('../fixtures/loaded-packages.mjs', import.meta.url))
const OPTIONAL = ['bullmq', 'ioredis', '@grpc/grpc-js', '@grpc/proto-loader', 'protobufjs', 'ws', '@sigstore/verify']

describe('what a served process loads', () => {
  const dir = tempDir('mb-lazy-')
  const servers: Served[] = []
  after(async () => {
    for (const s of servers) await s.stop()
  })

  /** The packages a ready server has loaded (see the preload). */
  async function loaded(args: string[], env: Record<string, string> = {}): Promise<string[]> {
    const file = join(dir, `loaded-${servers.length}.json`)
    const s = await serveReady('examples/greeter/service.ts', args, { LOADED_PACKAGES_FILE: file, ...env }, [
      '--import',
      PRELOAD,
    ])
    servers.push(s)
    process.kill(s.pid, 'SIGUSR2')
    await until('the server to list its packages', () => existsSync(file))
    return JSON.parse(readFileSync(file, 'utf8')) as string[]
  }

  it('a plain HTTP server loads none of the optional protocols, and gRPC loads when its port opens', async () => {
    const plain = await loaded([])
    // What every server needs is there: the probe sees packages loaded by import.
    for (const p of ['better-sqlite3', 'prom-client', 'pino']) assert.ok(plain.includes(p), `${p} in ${plain}`)
    assert.deepEqual(
      OPTIONAL.filter((p) => plain.includes(p)),
      [],
    )
    const grpc = await loaded(['--grpc-port', '0'])
    assert.ok(grpc.includes('@grpc/grpc-js'), `@grpc/grpc-js in ${grpc}`)
  })
})
