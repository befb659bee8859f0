import { BundleError } from '../../errors/index.js'

/**
 * `resources.gpu` of a runner: a whole number of devices per worker (1, 2, …), a fraction of
 * one device per worker (0.5 packs two workers onto each device), or an explicit list of
 * device ids the workers take in turn.
 */
export type GpuRequest = number | readonly (number | string)[]

const unavailable = (msg: string) => new BundleError('E_RUNNER_GPU_UNAVAILABLE', msg)

/**
 * Which devices each worker sees (its CUDA_VISIBLE_DEVICES), or undefined when the runner
 * asks for no GPU. Refuses, rather than over-subscribes, when the devices do not suffice.
 *
 * @example
 * placeWorkers(4, 0.5, ['0', '1']) // [['0'], ['0'], ['1'], ['1']]
 */
export function placeWorkers(
  workers: number,
  gpu: GpuRequest | undefined,
  devices: readonly string[],
): string[][] | undefined {
  if (gpu === undefined || gpu === 0) return undefined
  if (Array.isArray(gpu)) {
    const wanted = gpu.map(String)
    const missing = wanted.filter((d) => !devices.includes(d))
    if (wanted.length === 0) throw unavailable('resources.gpu is an empty device list')
    if (missing.length)
      throw unavailable(
        `GPU device(s) ${missing.join(', ')} not found; this machine has ` +
          `${devices.length ? devices.join(', ') : 'none'}`,
      )
    return Array.from({ length: workers }, (_, i) => [wanted[i % wanted.length]!])
  }
  const n = gpu as number
  if (!(n > 0) || !Number.isFinite(n))
    throw unavailable(`resources.gpu must be a positive number or a device list, got ${n}`)
  if (devices.length === 0)
    throw unavailable(
      'this runner asks for a GPU but none was found (nvidia-smi -L lists none; BUNDLE_GPU_DEVICES overrides)',
    )
  if (n >= 1) {
    if (!Number.isInteger(n)) throw unavailable(`resources.gpu above 1 must be a whole number of devices, got ${n}`)
    if (workers * n > devices.length)
      throw unavailable(
        `${workers} worker(s) × ${n} GPU(s) need ${workers * n} devices; this machine has ${devices.length}`,
      )
    return Array.from({ length: workers }, (_, i) => devices.slice(i * n, (i + 1) * n))
  }
  const perDevice = Math.floor(1 / n + 1e-9)
  if (workers > perDevice * devices.length)
    throw unavailable(
      `${workers} worker(s) at ${n} GPU each need ${Math.ceil(workers / perDevice)} devices; this machine has ` +
        `${devices.length}`,
    )
  return Array.from({ length: workers }, (_, i) => [devices[Math.floor(i / perDevice)]!])
}

/** Workers per device from each worker's devices (a worker on two devices counts on both). */
export function workersPerDevice(placement: readonly (readonly string[])[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const devices of placement) for (const d of devices) out[d] = (out[d] ?? 0) + 1
  return out
}
