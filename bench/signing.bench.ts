// npm run bench:signing — what verifying a signed model costs next to one sha256 pass over its files.
import { createHash, randomBytes } from 'node:crypto'
import { createReadStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeys, loadTrustedKey, ModelStore, signModel, verifyModel } from '../store/index.js'
import { MODELS } from '../test/utils/models.js'
import { fmt, machine, median, writeSection } from './results.js'

const root = mkdtempSync(join(tmpdir(), 'mb-bench-signing-'))
const ROUNDS = 7

/** The floor: one streaming sha256 of each file, as `sha256sum` would read them (same 1 MiB reads). */
async function sha256Pass(files: readonly string[]): Promise<void> {
  for (const f of files) {
    const h = createHash('sha256')
    for await (const chunk of createReadStream(f, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer)
    h.digest()
  }
}

const ms = async (fn: () => Promise<unknown>) => {
  const t = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - t) / 1e6
}

try {
  const store = ModelStore.open({ home: join(root, 'home') })
  const keys = generateKeys(join(root, 'keys'))
  const trusted = [loadTrustedKey(keys.publicKey)]
  // A real model (the OCR recognizer) and a large one: 4 files of 64 MiB of random bytes.
  const big = join(root, 'big')
  mkdirSync(big)
  for (let i = 0; i < 4; i++) writeFileSync(join(big, `shard-${i}.bin`), randomBytes(64 * 1024 ** 2))
  writeFileSync(join(big, 'model.onnx'), readFileSync(MODELS.rec))
  const cases = [
    { name: 'ocr-rec', label: 'OCR recognizer (1 file)', paths: [MODELS.rec] },
    { name: 'big', label: '4 × 64 MiB + the recognizer (5 files)', paths: [big] },
  ]
  const rows: string[] = []
  for (const c of cases) {
    const m = await store.save({ name: c.name, version: '1', paths: c.paths })
    await signModel(store, m.tag, keys.privateKey)
    const { files } = await store.paths(m.tag)
    const list = Object.values(files)
    const bytes = m.size
    // Alternate the two in each round, so the page cache and the machine's noise treat both alike.
    await sha256Pass(list)
    const hash: number[] = []
    const verify: number[] = []
    for (let r = 0; r < ROUNDS; r++) {
      hash.push(await ms(() => sha256Pass(list)))
      verify.push(await ms(() => verifyModel(store, m, trusted)))
    }
    const ratio = median(verify.map((v, i) => v / hash[i]!))
    rows.push(
      `| ${c.label} | ${fmt(bytes / 1024 ** 2)} MiB | ${fmt(median(hash), 1)} ms | ${fmt(median(verify), 1)} ms | ` +
        `${fmt(ratio, 2)}× |`,
    )
    console.log(rows.at(-1))
  }
  store.close()
  writeSection(
    'signing',
    `## Verifying a signed model (\`npm run bench:signing\`)

${machine()}. Median of ${ROUNDS} rounds; in each round a plain streaming sha256 of every file (the floor:
verification must read every byte) and \`verifyModel\` (the signature bundle parsed by sigstore-js, its ECDSA
signature checked, every file hashed again and compared) run back to back, files in the page cache.
Target: verification ≤ 1.2× one sha256 pass.

| model | size | sha256 pass | verify | verify ÷ sha256 |
|---|---|---|---|---|
${rows.join('\n')}`,
  )
} finally {
  rmSync(root, { recursive: true, force: true })
}
