// npm run bench:ipc — what crossing into a runner worker process costs: the round trip of a
// call through the worker pool (child_process IPC for the message), its tensor through the
// worker's shared-memory file or inline in the message, at sizes either side of the default's
// threshold (SHM_MIN_BYTES).
// Against them, the floor a thread runner would have: a worker_threads echo in this process,
// the tensor copied into a fresh buffer (a request body's bytes sit in node's pooled memory and
// cannot be handed over) and moved there and back as a transferable.
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { SHM_MIN_BYTES } from '../runners/pool/shm.js'
import { WorkerPool } from '../runners/pool/worker-pool.js'
import { customBackend } from '../runners/custom/protocol.js'
import { fmt, machine, median, writeSection } from './results.js'

const ECHO = fileURLToPath(new URL('../test/fixtures/echo-runner.ts', import.meta.url))
interface Echo {
  run(method: string, tensor: { dtype: string; shape: number[]; data: Uint8Array }): Promise<unknown>
}

/** The thread floor: one worker thread that sends back what it gets, buffers moved both ways. */
function threadEcho(): Echo & { stop(): Promise<number> } {
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads')
     parentPort.on('message', (m) => parentPort.postMessage(m, [m.tensor.data.buffer]))`,
    { eval: true },
  )
  let seq = 0
  const waiting = new Map<number, (v: unknown) => void>()
  worker.on('message', (m: { id: number; tensor: unknown }) => {
    waiting.get(m.id)?.(m.tensor)
    waiting.delete(m.id)
  })
  return {
    run(_method, tensor) {
      const id = seq++
      const data = new Uint8Array(tensor.data) // the copy out of the request body's memory
      return new Promise((resolve) => {
        waiting.set(id, resolve)
        worker.postMessage({ id, tensor: { ...tensor, data } }, [data.buffer])
      })
    },
    stop: () => worker.terminate(),
  }
}

/** Round trips through each pool in turn, interleaved so all see the same machine noise. */
async function roundTrips(pools: Echo[], bytes: number, iterations: number): Promise<{ p50: number; p99: number }[]> {
  const tensor = { dtype: 'float32', shape: [bytes / 4], data: new Uint8Array(bytes).fill(7) }
  for (const pool of pools) for (let i = 0; i < 200; i++) await pool.run('echo', tensor)
  const samples: number[][] = pools.map(() => [])
  for (let i = 0; i < iterations; i++) {
    for (const [k, pool] of pools.entries()) {
      const t = performance.now()
      await pool.run('echo', tensor)
      samples[k]!.push(performance.now() - t)
    }
  }
  return samples.map((s) => {
    s.sort((a, b) => a - b)
    return { p50: median(s), p99: s[Math.floor(s.length * 0.99)]! }
  })
}

const echo = () =>
  new WorkerPool({ runner: 'echo', workers: 1, backend: customBackend({ module: ECHO, exportName: 'EchoRunner' }) })
// Every tensor through the file (BUNDLE_IPC_SHM_MIN_BYTES=1), every tensor inline (BUNDLE_IPC_SHM=0):
// each pool reads the environment when it is made.
process.env.BUNDLE_IPC_SHM_MIN_BYTES = '1'
const shmPool = echo()
await shmPool.start()
delete process.env.BUNDLE_IPC_SHM_MIN_BYTES
process.env.BUNDLE_IPC_SHM = '0'
const inlinePool = echo()
await inlinePool.start()
const thread = threadEcho()
const rows: string[] = []
const ms = (r: { p50: number; p99: number }) => `${fmt(r.p50, 3)} / ${fmt(r.p99, 3)}`
for (const bytes of [4, 16 * 1024, 32 * 1024, 64 * 1024, 100 * 1024, 1024 * 1024, 4096 * 1024]) {
  const [viaShm, inline, viaThread] = await roundTrips(
    [shmPool, inlinePool, thread],
    bytes,
    bytes > 500_000 ? 300 : 2000,
  )
  const size = bytes >= 1024 ? `${bytes / 1024} KiB` : `${bytes} B`
  const faster = viaShm!.p50 < inline!.p50 ? 'the file' : 'inline'
  const taken = bytes >= SHM_MIN_BYTES ? 'the file' : 'inline'
  rows.push(`| ${size} | ${ms(viaShm!)} | ${ms(inline!)} | ${ms(viaThread!)} | ${faster} | ${taken} |`)
}
await thread.stop()
await shmPool.stop()
await inlinePool.stop()

writeSection(
  'ipc',
  `## Worker round trip (\`npm run bench:ipc\`)\n\n${machine()}. One worker process echoing a tensor, to the ` +
    `worker and back; p50 / p99 in ms. Through the worker's shared-memory file (/dev/shm; every size forced there ` +
    `with BUNDLE_IPC_SHM_MIN_BYTES=1) or inline, inside the IPC message (BUNDLE_IPC_SHM=0); by default a tensor ` +
    `of ${SHM_MIN_BYTES / 1024} KiB or more takes the file. A worker thread in the API process, its tensor copied ` +
    `out of the request's memory and moved there and back as a transferable, is the floor of a thread runner ` +
    `(\`isolation: 'thread'\`; docs/operations.md, "Processes or threads"). The three paths are measured ` +
    `interleaved. How the default is chosen: docs/defaults.md.\n\n` +
    `| payload | the file | inline | a worker thread | faster of the two process paths | the default takes |\n` +
    `|---|---|---|---|---|---|\n${rows.join('\n')}`,
)
console.log(rows.join('\n'))
