import type { ServiceError } from '@grpc/grpc-js'
import { BundleError } from '../../../errors/index.js'
import { realClock } from '../../../runners/index.js'
import { measureStep, type Load } from './drive.js'
import { inferenceClient } from './grpc-client.js'
import { filePayloads, parseShape, randomTensor, tensorPayload, type TensorInput } from './inputs.js'
import { parseRange } from './range.js'
import type { BenchRow } from './report.js'
import { type Snapshot, snapshot, split } from './server-stats.js'
import { apiTarget, grpcTarget, type Target, v2Target } from './targets.js'

export { csv, json, table, type BenchRow } from './report.js'
export type { Target } from './targets.js'
export { plotHtml } from './plot.js'

export interface BenchOptions {
  /** `http(s)://host:port` (a service API or /v2) or `grpc://host:port`. */
  url: string
  /** A service API route (`/classify`): POSTs `input` or a tensor of `shapes`. */
  api?: string
  /** A model, over /v2 binary (http) or ModelInfer (grpc), with random tensors of `shapes`. */
  model?: string
  version?: string
  /** A file, or a directory of files sent in turn (service APIs). */
  input?: string
  contentType?: string
  /** `1,3,48,192`, or `name=1,3,48,192` per input of a model with several. */
  shapes?: string[]
  /** Closed-loop sweep (`1:64:x2`), or */
  concurrency?: string
  /** an open-loop one in requests per second (`50:400:50`). */
  rate?: string
  arrivals?: 'constant' | 'poisson'
  warmupMs?: number
  windowMs?: number
  maxWindows?: number
  key?: string
}

const usage = (msg: string) => new BundleError('E_CLI_USAGE', msg)

interface Where {
  http?: URL
  grpc?: string
}

function where(url: string): Where {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    throw usage(`"${url}" is not a URL: write http://HOST:PORT or grpc://HOST:PORT`)
  }
  if (u.protocol === 'grpc:') {
    if (!u.hostname || !u.port) throw usage(`"${url}": a gRPC URL names its host and port, e.g. grpc://127.0.0.1:8001`)
    return { grpc: u.host }
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') return { http: u }
  throw usage(`"${url}": the scheme must be http, https or grpc`)
}

/** A model's declared inputs, from its metadata over HTTP or gRPC. */
async function modelInputs(
  w: Where,
  model: string,
  o: BenchOptions,
): Promise<{ name: string; datatype: string; shape: number[] }[]> {
  const unreachable = (why: string) =>
    new BundleError('E_SERVER_UNREACHABLE', `cannot read model "${model}" from ${o.url}: ${why}`)
  if (w.grpc) {
    const client = inferenceClient(w.grpc, o.key)
    try {
      const meta = await client
        .call<any>('ModelMetadata', { name: model, version: o.version ?? '' }, 10_000)
        .catch((e: ServiceError) => {
          throw e.code === 5 ? usage(`model "${model}": ${e.details}`) : unreachable(e.details || e.message)
        })
      return meta.inputs.map((i: any) => ({ name: i.name, datatype: i.datatype, shape: i.shape.map(Number) }))
    } finally {
      client.close()
    }
  }
  const path = `/v2/models/${encodeURIComponent(model)}${o.version ? `/versions/${encodeURIComponent(o.version)}` : ''}`
  const res = await fetch(new URL(path, w.http), { signal: AbortSignal.timeout(10_000) }).catch((e: Error) => {
    throw unreachable((e.cause as Error | undefined)?.message ?? e.message)
  })
  if (res.status === 404) throw usage(`model "${model}" is not served at ${o.url} (see /v2/repository/index)`)
  if (!res.ok) throw unreachable(`HTTP ${res.status}`)
  // Not JSON: refused just below, as a body without inputs.
  const meta = (await res.json().catch(() => undefined)) as { inputs?: unknown } | undefined
  if (!Array.isArray(meta?.inputs))
    throw new BundleError(
      'E_SERVER_REQUEST_FAILED',
      `${o.url}${path} did not answer with model metadata: is it an Open Inference Protocol server?`,
    )
  return meta.inputs as { name: string; datatype: string; shape: number[] }[]
}

/** Random tensors for each input: --shape for the dynamic ones (name=… when there are several). */
function tensors(declared: { name: string; datatype: string; shape: number[] }[], shapes: string[]): TensorInput[] {
  const given = new Map<string, number[]>()
  for (const s of shapes) {
    const eq = s.indexOf('=')
    if (eq < 0) {
      if (declared.length !== 1)
        throw usage(
          `the model has ${declared.length} inputs: write --shape NAME=DIMS for each ` +
            `(${declared.map((d) => d.name).join(', ')})`,
        )
      given.set(declared[0]!.name, parseShape(s))
    } else given.set(s.slice(0, eq), parseShape(s.slice(eq + 1)))
  }
  for (const name of given.keys())
    if (!declared.some((d) => d.name === name))
      throw usage(`--shape ${name}=…: the model has no input "${name}" (${declared.map((d) => d.name).join(', ')})`)
  return declared.map((d) => {
    const shape = given.get(d.name) ?? (d.shape.every((n) => n > 0) ? d.shape : undefined)
    if (shape === undefined)
      throw usage(`input "${d.name}" has the shape [${d.shape.join(',')}] (-1: any): give it one with --shape`)
    return randomTensor(d.name, d.datatype, shape)
  })
}

async function makeTarget(o: BenchOptions, w: Where, sockets: number): Promise<Target> {
  if ((o.api === undefined) === (o.model === undefined))
    throw usage('say what to load: --api ROUTE (a service API) or --model NAME (a model over /v2 or gRPC)')
  if (o.model !== undefined) {
    if (o.input !== undefined) throw usage('--input goes with --api; a model gets random tensors of --shape')
    const inputs = tensors(await modelInputs(w, o.model, o), o.shapes ?? [])
    return w.grpc
      ? grpcTarget(w.grpc, o.model, inputs, {
          ...(o.key ? { key: o.key } : {}),
          ...(o.version ? { version: o.version } : {}),
        })
      : v2Target(w.http!, o.model, inputs, {
          ...(o.key ? { key: o.key } : {}),
          sockets,
          ...(o.version ? { version: o.version } : {}),
        })
  }
  if (w.grpc) throw usage('a service API is served over HTTP: give an http:// URL with --api, or --model over gRPC')
  if ((o.input === undefined) === (o.shapes === undefined || o.shapes.length === 0))
    throw usage('--api needs its request body: --input FILE|DIR, or --shape DIMS for a tensor API')
  const payloads =
    o.input !== undefined ? filePayloads(o.input, o.contentType) : [tensorPayload(parseShape(o.shapes![0]!))]
  return apiTarget(w.http!, o.api!, payloads, { ...(o.key ? { key: o.key } : {}), sockets })
}

/** The APIs a service serves, from its /openapi.json (none when it has none to give). */
async function servedRoutes(url: string, key: string | undefined): Promise<string[]> {
  // No document (unreachable, not JSON): no routes to offer, which the caller reports.
  const res = await fetch(new URL('/openapi.json', url), {
    signal: AbortSignal.timeout(5_000),
    ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}),
  }).catch(() => undefined)
  const doc = (await res?.json().catch(() => undefined)) as { paths?: Record<string, object> } | undefined
  // APIs take POST; the health and metrics routes are GETs.
  return Object.entries(doc?.paths ?? {}).flatMap(([path, ops]) => ('post' in ops ? [path] : []))
}

/**
 * One request first: a wrong URL, route, key or input fails now with the server's answer, not
 * as a table of errors. A route the server does not serve is the same mistake as a model it does
 * not serve (a name on the command line): E_CLI_USAGE for both, naming what it does serve.
 */
async function probe(target: Target, o: BenchOptions): Promise<void> {
  const url = o.url
  const first = await target.send()
  if (first.ok || first.refused) return
  if (/^E(CONN|HOST|NOTFOUND|AI_)|^UNAVAILABLE$|^14$/.test(first.code))
    throw new BundleError('E_SERVER_UNREACHABLE', `cannot reach ${url}: ${first.code}`)
  if (o.api !== undefined && first.code === 'E_HTTP_NOT_FOUND') {
    const routes = await servedRoutes(url, o.key)
    throw usage(`route "${o.api}" is not served at ${url}${routes.length ? ` (its APIs: ${routes.join(', ')})` : ''}`)
  }
  throw new BundleError(
    'E_SERVER_REQUEST_FAILED',
    `the server answered the first request with ${first.code}${first.message ? ` (${first.message})` : ''}; check ` +
      'the route or model, --input or --shape, and the key',
  )
}

/** The target of `o` (checked with one request), for callers that drive the load themselves (bundle tune). */
export async function prepareTarget(o: BenchOptions, sockets: number): Promise<Target> {
  const target = await makeTarget(o, where(o.url), sockets)
  try {
    await probe(target, o)
  } catch (err) {
    target.close()
    throw err
  }
  return target
}

/**
 * bundle bench: a sweep of load steps against a running server, each measured until stable,
 * with the client's goodput and latency and the server's own queue, compute and batch figures.
 */
export async function runBench(
  o: BenchOptions,
  progress: (line: string) => void = () => undefined,
): Promise<BenchRow[]> {
  const w = where(o.url)
  if (o.concurrency !== undefined && o.rate !== undefined) throw usage('give --concurrency or --rate, not both')
  const loads: Load[] =
    o.rate !== undefined
      ? parseRange('--rate', o.rate).map((value) => ({ mode: 'rate', value, arrivals: o.arrivals ?? 'constant' }))
      : parseRange('--concurrency', o.concurrency ?? '1:32:x2', { integer: true }).map((value) => ({
          mode: 'concurrency',
          value,
        }))
  const most = Math.max(...loads.map((l) => l.value))
  // Open loop: sockets for everything that may be in flight at the highest rate (a second of it).
  const target = await makeTarget(o, w, loads[0]!.mode === 'rate' ? Math.max(64, Math.ceil(most)) : Math.ceil(most))
  const rows: BenchRow[] = []
  try {
    await probe(target, o)
    const stats = { ...w, ...(o.key ? { key: o.key } : {}) }
    for (const load of loads) {
      const name = load.mode === 'rate' ? `${load.value}/s` : `c=${load.value}`
      // The server's figures over the same windows as the client's: a snapshot at each window edge.
      const edges: Promise<Snapshot | undefined>[] = []
      const r = await measureStep(() => target.send(), load, {
        clock: realClock,
        onEdge: (i) => void (edges[i] = snapshot(stats)),
        warmupMs: o.warmupMs ?? 2_000,
        windowMs: o.windowMs ?? 2_000,
        maxWindows: o.maxWindows ?? 10,
        onWindow: (ws) => {
          const last = ws[ws.length - 1]!
          progress(
            `${name}: window ${ws.length}/${o.maxWindows ?? 10}  ${last.goodput.toFixed(1)}/s  p99 ` +
              `${last.p99.toFixed(2)} ms${last.refused ? `  refused ${last.refused}` : ''}`,
          )
        },
      })
      const counted = Math.min(3, r.windows)
      rows.push({ ...r, server: split(await edges[r.windows - counted], await edges[r.windows]) })
    }
  } finally {
    target.close()
  }
  return rows
}
