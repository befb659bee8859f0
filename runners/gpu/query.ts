import { execFile } from 'node:child_process'

/** One GPU as nvidia-smi reports it; a figure the device does not give (MIG, "[N/A]") is absent. */
export interface GpuSample {
  /** CUDA device index, as CUDA_VISIBLE_DEVICES and runner placement name it. */
  index: string
  uuid: string
  name: string
  /** Share of the last sample period a kernel ran, 0–1 (absent while MIG is on). */
  utilization?: number
  memoryUsedBytes?: number
  memoryTotalBytes?: number
  powerWatts?: number
  powerLimitWatts?: number
}

/** The fields asked of nvidia-smi, in the order parseGpuQuery reads them. */
export const QUERY_FIELDS = [
  'index',
  'uuid',
  'name',
  'utilization.gpu',
  'memory.used',
  'memory.total',
  'power.draw',
  'power.limit',
] as const

const MIB = 1024 * 1024

/** A number nvidia-smi printed, or undefined for its "[N/A]", "[Not Supported]" and the like. */
function figure(cell: string | undefined, scale = 1): number | undefined {
  if (cell === undefined) return undefined
  const n = Number(cell.trim())
  return cell.trim() !== '' && Number.isFinite(n) ? n * scale : undefined
}

/**
 * `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits` output → samples
 * (memory in MiB becomes bytes, utilisation in % becomes a ratio). Lines that do not hold every
 * field are skipped rather than misread.
 */
export function parseGpuQuery(csv: string): GpuSample[] {
  const out: GpuSample[] = []
  for (const line of csv.split('\n')) {
    const cells = line.split(',').map((c) => c.trim())
    if (cells.length !== QUERY_FIELDS.length || !/^\d+$/.test(cells[0]!)) continue
    const [index, uuid, name, util, used, total, power, limit] = cells as [string, ...string[]]
    const sample: GpuSample = { index, uuid: uuid!, name: name! }
    const u = figure(util, 1 / 100)
    if (u !== undefined) sample.utilization = u
    const mu = figure(used, MIB)
    if (mu !== undefined) sample.memoryUsedBytes = mu
    const mt = figure(total, MIB)
    if (mt !== undefined) sample.memoryTotalBytes = mt
    const p = figure(power)
    if (p !== undefined) sample.powerWatts = p
    const pl = figure(limit)
    if (pl !== undefined) sample.powerLimitWatts = pl
    out.push(sample)
  }
  return out
}

/** Asks nvidia-smi (on PATH) for every GPU's figures; never blocks the event loop, gives up after 5 s. */
export function queryGpus(): Promise<GpuSample[]> {
  return new Promise((resolve, reject) =>
    execFile(
      'nvidia-smi',
      [`--query-gpu=${QUERY_FIELDS.join(',')}`, '--format=csv,noheader,nounits'],
      { timeout: 5_000, encoding: 'utf8' },
      (err, stdout) => (err ? reject(err) : resolve(parseGpuQuery(stdout))),
    ),
  )
}
