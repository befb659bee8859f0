import type { BundleError } from '../../errors/index.js'
import type { WarmupInput, WarmupOptions, WarmupSample } from './options.js'

type Bad = (msg: string) => BundleError

function only(where: string, obj: Record<string, unknown>, keys: readonly string[], bad: Bad): void {
  for (const k of Object.keys(obj))
    if (!keys.includes(k)) throw bad(`${where}: unknown key "${k}" (known: ${keys.join(', ')})`)
}

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)
const isSizes = (v: unknown): v is number[] =>
  Array.isArray(v) && v.every((d) => typeof d === 'number' && Number.isSafeInteger(d) && d >= 0)
const wholeNumber = (v: unknown, min: number): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= min

/** A runner's `warmup` setting (serve config, environment, a /v2 load's config): false, or rounds, shapes, samples. */
export function validateWarmup(where: string, w: unknown, bad: Bad): false | WarmupOptions {
  if (w === false) return false
  if (!isMap(w)) throw bad(`${where} must be false or a mapping with rounds, shapes and/or samples`)
  only(where, w, ['rounds', 'shapes', 'samples'], bad)
  const out: WarmupOptions = {}
  if (w.rounds !== undefined) {
    if (!wholeNumber(w.rounds, 0))
      throw bad(`${where}.rounds must be a whole number (0 turns warm-up off), got ${JSON.stringify(w.rounds)}`)
    out.rounds = w.rounds
  }
  if (w.shapes !== undefined) {
    if (!isMap(w.shapes)) throw bad(`${where}.shapes must map input names to shapes, e.g. { x: [3, 48, 192] }`)
    out.shapes = {}
    for (const [name, shape] of Object.entries(w.shapes)) {
      if (!isSizes(shape))
        throw bad(
          `${where}.shapes.${name} must be a list of sizes (without the batch dimension for a model that batches), ` +
            `got ${JSON.stringify(shape)}`,
        )
      out.shapes[name] = shape
    }
  }
  if (w.samples !== undefined) {
    if (!Array.isArray(w.samples)) throw bad(`${where}.samples must be a list of warm-up calls`)
    out.samples = w.samples.map((s, i) => validateSample(`${where}.samples[${i}]`, s, bad))
  }
  return out
}

function validateSample(where: string, s: unknown, bad: Bad): WarmupSample {
  if (!isMap(s)) throw bad(`${where} must be a mapping with inputs (and name, batchSize, count)`)
  only(where, s, ['name', 'batchSize', 'count', 'inputs'], bad)
  if (s.name !== undefined && typeof s.name !== 'string') throw bad(`${where}.name must be a string`)
  if (s.batchSize !== undefined && !wholeNumber(s.batchSize, 1))
    throw bad(`${where}.batchSize must be a whole number ≥ 1, got ${JSON.stringify(s.batchSize)}`)
  if (s.count !== undefined && !wholeNumber(s.count, 1))
    throw bad(`${where}.count must be a whole number ≥ 1, got ${JSON.stringify(s.count)}`)
  if (!isMap(s.inputs) || Object.keys(s.inputs).length === 0)
    throw bad(`${where}.inputs must map input names to { dims, zeroData | randomData | inputDataFile }`)
  const inputs: Record<string, WarmupInput> = {}
  for (const [name, raw] of Object.entries(s.inputs)) {
    const at = `${where}.inputs.${name}`
    if (!isMap(raw)) throw bad(`${at} must be a mapping with dims`)
    only(at, raw, ['dims', 'dtype', 'zeroData', 'randomData', 'inputDataFile'], bad)
    if (!isSizes(raw.dims)) throw bad(`${at}.dims must be a list of sizes, got ${JSON.stringify(raw.dims)}`)
    const sources = ['zeroData', 'randomData', 'inputDataFile'].filter((k) => raw[k] !== undefined && raw[k] !== false)
    if (sources.length > 1) throw bad(`${at}: give one of zeroData, randomData, inputDataFile (got ${sources})`)
    if (raw.dtype !== undefined && typeof raw.dtype !== 'string') throw bad(`${at}.dtype must be a dtype name`)
    if (raw.inputDataFile !== undefined && typeof raw.inputDataFile !== 'string')
      throw bad(`${at}.inputDataFile must be a file path`)
    inputs[name] = {
      dims: raw.dims,
      ...(raw.dtype !== undefined ? { dtype: raw.dtype as string } : {}),
      ...(raw.randomData === true ? { randomData: true } : {}),
      ...(raw.zeroData === true ? { zeroData: true } : {}),
      ...(raw.inputDataFile !== undefined ? { inputDataFile: raw.inputDataFile as string } : {}),
    }
  }
  return {
    ...(s.name !== undefined ? { name: s.name as string } : {}),
    ...(s.batchSize !== undefined ? { batchSize: s.batchSize as number } : {}),
    ...(s.count !== undefined ? { count: s.count as number } : {}),
    inputs,
  }
}
