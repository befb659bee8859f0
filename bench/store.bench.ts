// npm run bench:store — the model store's speed: save, list at 10k models, tag resolution.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ModelStore } from '../store/index.js'
import { MODELS } from '../test/utils/models.js'
import { fmt, machine, median, writeSection } from './results.js'

const BIN = fileURLToPath(new URL('../bin/bundle', import.meta.url))
const root = mkdtempSync(join(tmpdir(), 'mb-bench-store-'))
const N_MODELS = 10_000

function timeIt(fn: () => void): number {
  const t = process.hrtime.bigint()
  fn()
  return Number(process.hrtime.bigint() - t) / 1e6
}

async function timeAsync(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - t) / 1e6
}

function cli(args: string[], home: string): number {
  const t = process.hrtime.bigint()
  const r = spawnSync(process.execPath, [BIN, ...args], {
    env: { ...process.env, BUNDLE_HOME: home },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  if (r.status !== 0) throw new Error(`bundle ${args.join(' ')} failed: ${r.stderr}`)
  return Number(process.hrtime.bigint() - t) / 1e6
}

try {
  const rows: string[] = []
  const recMb = statSync(MODELS.rec).size / 1024 ** 2

  // 1. Save of the 10.8 MB rec model into a fresh store each time (new blob: copy + fsync + signature).
  const saveNew: number[] = []
  const saveCustom: number[] = []
  const saveDup: number[] = []
  for (let i = 0; i < 5; i++) {
    const store = ModelStore.open({ home: join(root, `save-${i}`) })
    saveNew.push(await timeAsync(() => store.save({ name: 'ocr-rec', paths: [MODELS.rec] })))
    saveDup.push(await timeAsync(() => store.save({ name: 'ocr-rec', paths: [MODELS.rec] })))
    store.close()
    const custom = ModelStore.open({ home: join(root, `save-custom-${i}`) })
    saveCustom.push(await timeAsync(() => custom.save({ name: 'ocr-rec', paths: [MODELS.rec], framework: 'custom' })))
    custom.close()
  }
  rows.push(
    `| save rec model (${fmt(recMb)} MB), new blob, with ONNX signature | ${fmt(median(saveNew))} ms | ` +
      `${fmt(recMb / (median(saveNew) / 1000))} MB/s |`,
  )
  rows.push(
    `| save rec model, new blob, \`--framework custom\` (no signature) | ${fmt(median(saveCustom))} ms | ` +
      `${fmt(recMb / (median(saveCustom) / 1000))} MB/s |`,
  )
  rows.push(`| save rec model again (blob already stored), with signature | ${fmt(median(saveDup))} ms | |`)

  // 2. list with 10,000 models in the index.
  const home = join(root, 'list')
  const store = ModelStore.open({ home })
  const tiny = join(root, 'tiny.bin')
  const fill = process.hrtime.bigint()
  for (let i = 0; i < N_MODELS; i++) {
    writeFileSync(tiny, `model ${i % 500}`)
    await store.save({
      name: `model-${i % 100}`,
      version: `1.${Math.floor(i / 100)}.0`,
      paths: [tiny],
      labels: { team: `t${i % 7}` },
    })
  }
  const fillMs = Number(process.hrtime.bigint() - fill) / 1e6
  rows.push(`| populate: ${N_MODELS} saves of a small file | ${fmt(fillMs / N_MODELS, 2)} ms/save | |`)
  const listIn = Array.from({ length: 7 }, () => timeIt(() => store.list()))
  rows.push(`| \`list()\` in-process, ${N_MODELS} models (target ≤ 100 ms) | ${fmt(median(listIn))} ms | |`)
  const listLabel = Array.from({ length: 7 }, () => timeIt(() => store.list({ labels: { team: 't3' } })))
  rows.push(`| \`list({ labels: { team: 't3' } })\` in-process (1/7 match) | ${fmt(median(listLabel))} ms | |`)
  const listCli = Array.from({ length: 5 }, () => cli(['models', 'list'], home))
  rows.push(
    `| \`bundle models list\` wall, ${N_MODELS} models, table (target ≤ 500 ms) | ${fmt(median(listCli))} ms | |`,
  )
  const listJson = Array.from({ length: 5 }, () => cli(['models', 'list', '-o', 'json'], home))
  rows.push(`| \`bundle models list -o json\` wall, ${N_MODELS} models | ${fmt(median(listJson))} ms | |`)

  // 3. Tag resolution (µs per call, in-process).
  const ITER = 20_000
  const resolveRow = (label: string, tag: string): void => {
    store.get(tag)
    const samples = Array.from(
      { length: 5 },
      () =>
        (timeIt(() => {
          for (let i = 0; i < ITER; i++) store.get(tag)
        }) *
          1000) /
        ITER,
    )
    rows.push(`| resolve \`${tag}\` (${label}) | ${fmt(median(samples), 1)} µs | |`)
  }
  resolveRow('exact', 'model-42:1.57.0')
  resolveRow('latest', 'model-42')
  resolveRow('unique prefix', 'model-42:1.57')
  resolveRow('semver range over 100 versions', 'model-42@^1.20.0')
  store.close()

  const help = Array.from({ length: 7 }, () => cli(['--help'], home))
  rows.push(`| \`bundle --help\` wall (target < 300 ms) | ${fmt(median(help))} ms | |`)

  writeSection(
    'store',
    `## Model store (\`npm run bench:store\`)\n\n${machine()}. Medians.\n\n| what | time | throughput |\n` +
      `|---|---|---|\n${rows.join('\n')}\n\n` +
      'Save time includes hashing, the copy into the store, fsync of the blob and its directory, and (for ONNX) ' +
      'loading the graph in onnxruntime to read its signature. ' +
      'CLI wall times include starting Node, loading better-sqlite3 and printing every row.',
  )
  console.log(rows.join('\n'))
} finally {
  rmSync(root, { recursive: true, force: true })
}
