import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, until } from './remote.js'
import { owned } from './serve.js'

// The monitoring tools operators run, for real: a Prometheus server (Debian package) scraping
// a `bundle serve` (utils/serve.ts). .ci/run installs prometheus/promtool and sets
// BUNDLE_REQUIRE_MONITORING_TESTS=1, so CI cannot skip the tests that use them.

const has = (cmd: string) => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0
const present = has('promtool') && has('prometheus')
const required = process.env.BUNDLE_REQUIRE_MONITORING_TESTS === '1'

/** Whether promtool and prometheus are here, whether CI demands them, and the `skip` option to give describe(). */
export const monitoring = {
  present,
  required,
  skip:
    !present && !required
      ? 'prometheus/promtool are not installed (apt-get install prometheus); CI installs them'
      : (false as const),
}

export interface Series {
  metric: Record<string, string>
  value?: [number, string]
  values?: [number, string][]
}

/** What Prometheus' HTTP API answers: status success with data, or status error with the reason. */
export interface ApiAnswer<T> {
  status: 'success' | 'error'
  data: T
  errorType?: string
  error?: string
}

export interface Prometheus {
  /** Base of the HTTP API, e.g. http://127.0.0.1:PORT/api/v1 */
  api: string
  /** GET api/v1/PATH with query parameters, whatever the answer (a bad query is a 400 with status error). */
  get<T>(path: string, params: Record<string, string | string[]>): Promise<ApiAnswer<T>>
  /** Instant query; asserts status success. */
  query(q: string): Promise<Series[]>
  /** Replaces the scraped targets (host:port); Prometheus picks the change up within a second or so. */
  setTargets(targets: readonly string[]): void
  stop(): Promise<void>
}

/**
 * A real Prometheus scraping `targets` (host:port) every second under job `job`, adding `labels`
 * to every series (as Kubernetes service discovery adds `pod`); promtool checks its config
 * first. Resolves once it is ready and every target is up. The targets come from a file it
 * watches (file-based discovery), so setTargets() changes them while it runs, as pods come and go.
 */
export async function startPrometheus(
  targets: readonly string[],
  job = 'modelbundle',
  labels: Record<string, string> = {},
): Promise<Prometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'mb-prom-'))
  const config = join(dir, 'prometheus.yml')
  const targetsFile = join(dir, 'targets.json')
  const setTargets = (list: readonly string[]) => {
    // Written whole, then renamed: Prometheus never reads half a file.
    writeFileSync(`${targetsFile}.tmp`, JSON.stringify([{ targets: list, labels }]))
    renameSync(`${targetsFile}.tmp`, targetsFile)
  }
  setTargets(targets)
  writeFileSync(
    config,
    `global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ${job}\n    file_sd_configs:\n` +
      `      - files: ['${targetsFile}']\n        refresh_interval: 1s\n`,
  )
  const check = spawnSync('promtool', ['check', 'config', config], { encoding: 'utf8' })
  assert.equal(check.status, 0, check.stdout + check.stderr)
  const port = await freePort()
  const child = spawn(
    'prometheus',
    [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: 'ignore' },
  )
  const stop = owned(child, dir)
  const api = `http://127.0.0.1:${port}/api/v1`
  const get = async <T>(path: string, params: Record<string, string | string[]>): Promise<ApiAnswer<T>> => {
    const qs = new URLSearchParams()
    for (const [k, v] of Object.entries(params)) for (const one of [v].flat()) qs.append(k, one)
    return (await (await fetch(`${api}/${path}?${qs}`)).json()) as ApiAnswer<T>
  }
  const query = async (q: string) => {
    const r = await get<{ result: Series[] }>('query', { query: q })
    assert.equal(r.status, 'success', `${q}: ${r.error}`)
    return r.data.result
  }
  try {
    await until(
      'prometheus ready',
      async () => (await fetch(`http://127.0.0.1:${port}/-/ready`).catch(() => undefined))?.status === 200,
      60_000,
    )
    await until(
      'the targets are up',
      async () => {
        const up = await query(`up{job="${job}"}`)
        return up.length === targets.length && up.every((s) => s.value?.[1] === '1')
      },
      60_000,
    )
  } catch (e) {
    await stop()
    throw e
  }
  return { api, get, query, stop, setTargets }
}
