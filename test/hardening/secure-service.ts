import { chmodSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before } from 'node:test'
import pino from 'pino'
import { z } from 'zod'
import {
  BundleError,
  createServiceApp,
  defineApi,
  defineService,
  io,
  onnxRunner,
  type ServiceApp,
} from '../../framework/index.js'
import { RedisLink } from '../../runners/index.js'
import { ModelStore } from '../../store/index.js'
import { writeOnnxModel } from '../utils/onnx-builder.js'
import { privateRedis } from '../utils/remote.js'
import { tempDir } from '../utils/tmp.js'

// The app the security tests provoke: an API key, a small body limit, every route family (JSON,
// tensor, multipart, image, tasks over a private Redis, /v2 with a good and a damaged model) and
// handlers that throw errors naming files.

export const silent = pino({ level: 'silent' })
export const KEY = 's3cret-key'
export const auth = { authorization: `Bearer ${KEY}` }
export const MAX_BODY = 64 * 1024
// File paths, file URLs, stack frames: none may reach a client.
export const LEAK = /\n\s+at |\/work\/|\/tmp\/|\/var\/lib|node_modules|file:\/\/|\.[tj]s:\d+/

const IDENT = {
  nodes: [{ op: 'Identity', inputs: ['x'], outputs: ['y'] }],
  inputs: [{ name: 'x', dtype: 'float32' as const, dims: ['n', 4] }],
  outputs: [{ name: 'y', dtype: 'float32' as const, dims: ['n', 4] }],
}
const NEG = { ...IDENT, nodes: [{ op: 'Neg', inputs: ['x'], outputs: ['y'] }] }

export const post = (
  app: ServiceApp['app'],
  path: string,
  body: ConstructorParameters<typeof Response>[0] | undefined,
  headers: Record<string, string> = {},
) =>
  app.request(path, {
    method: 'POST',
    headers: { ...auth, ...headers },
    ...(body === undefined ? {} : { body, duplex: 'half' }),
  } as RequestInit)

/** A body without Content-Length (sent chunked over a socket). */
export const chunked = (bytes: number): ReadableStream<Uint8Array> => {
  let left = bytes
  return new ReadableStream({
    pull(ctl) {
      if (left <= 0) return ctl.close()
      const n = Math.min(16 * 1024, left)
      left -= n
      ctl.enqueue(new Uint8Array(n).fill(32))
    },
  })
}

export interface SecureService {
  svc: ServiceApp
  stop(): Promise<void>
}

/**
 * Starts the app (its store, models and Redis included) in `work`, a temp dir the caller owns
 * (made in a describe body: one made in a before() hook goes when the hook ends); stop() takes
 * all of it down.
 */
export async function secureService(work: string): Promise<SecureService> {
  const home = join(work, 'home')
  const dir = join(work, 'models')
  mkdirSync(dir)
  const store = ModelStore.open({ home })
  await store.save({ name: 'ident', version: '1.0.0', paths: [writeOnnxModel(join(dir, 'ident.onnx'), IDENT)] })
  await store.save({ name: 'broken', version: '1.0.0', paths: [writeOnnxModel(join(dir, 'broken.onnx'), NEG)] })
  const brokenDigest = store.get('broken:1.0.0').files[0]!.sha256
  store.close()
  // A stored model whose bytes are damaged: loading it fails deep in onnxruntime, whose
  // message names the file under the store.
  const blobs = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? blobs(join(d, e.name)) : [join(d, e.name)],
    )
  const blob = blobs(join(home, 'blobs')).find((f) => f.endsWith(brokenDigest))!
  chmodSync(blob, 0o644)
  writeFileSync(blob, 'not a model')
  const redis = await privateRedis()
  const link = new RedisLink(redis.url, 'mb-security')
  const ident = onnxRunner('ident:1.0.0', { home, batching: { maxBatchSize: 8, maxLatencyMs: 5 } })
  const def = defineService({
    name: 'secure',
    runners: [ident],
    apis: {
      echo: defineApi({
        input: io.json(z.object({ v: z.number() })),
        output: io.json(z.object({ v: z.number() })),
        handler: async (x) => x,
      }),
      tensor: defineApi({
        input: io.tensor({ dtype: 'float32', shape: [-1, 4] }),
        output: io.json(z.object({ n: z.number() })),
        handler: async (x) => ({ n: x.data.length }),
      }),
      form: defineApi({
        input: io.multipart({ meta: io.json(z.object({ k: z.string() })), doc: io.file() }, { maxPartBytes: 1024 }),
        output: io.json(z.object({ k: z.string(), size: z.number() })),
        handler: async ({ meta, doc }) => ({ k: meta.k, size: doc.bytes.length }),
      }),
      img: defineApi({
        input: io.image(),
        output: io.json(z.object({ w: z.number() })),
        handler: async (i) => ({ w: i.width }),
      }),
      crash: defineApi({
        input: io.text(),
        output: io.text(),
        handler: async () => {
          throw new Error(
            'ENOENT: no such file /work/main/secret/model.onnx\n    at load ' +
              '(file:///work/main/node_modules/x/index.js:10:5)',
          )
        },
      }),
      storeFault: defineApi({
        input: io.text(),
        output: io.text(),
        handler: async () => {
          throw new BundleError('E_STORE_IO', 'cannot read /var/lib/modelbundle/blobs/sha256/ab/abcdef')
        },
      }),
      runnerFault: defineApi({
        input: io.text(),
        output: io.text(),
        handler: async () => {
          throw new BundleError(
            'E_RUNNER_CRASHED',
            'runner m worker #0 could not start: Load model from /tmp/home/checkouts/abc/m.onnx failed',
          )
        },
      }),
      job: defineApi({
        input: io.json(z.object({ n: z.number() })),
        output: io.json(z.object({ n: z.number() })),
        handler: async (x) => x,
        task: true,
      }),
    },
  })
  const svc = createServiceApp(def, {
    logger: silent,
    apiKey: KEY,
    storeHome: home,
    redis: link,
    maxBodyBytes: MAX_BODY,
  })
  await svc.start()
  return {
    svc,
    async stop() {
      await svc.stop()
      await link.close()
      await redis.stop()
    },
  }
}

/**
 * The fixture for one describe block: started before its tests (handed to `ready`), stopped after.
 * Call it in the describe body.
 */
export function useSecureService(ready: (svc: ServiceApp) => void): void {
  let fixture: SecureService | undefined
  const work = tempDir()
  before(async () => {
    fixture = await secureService(work)
    ready(fixture.svc)
  })
  after(async () => await fixture?.stop())
}
