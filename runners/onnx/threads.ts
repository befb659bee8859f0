import { readdirSync, readFileSync } from 'node:fs'
import { availableParallelism, totalmem } from 'node:os'

/**
 * The cores this process may use: those its affinity allows, fewer where a cgroup CPU quota
 * (a container's limit, /sys/fs/cgroup/cpu.max) allows less.
 */
export function usableCores(cgroupCpuMax = readOr('/sys/fs/cgroup/cpu.max')): number {
  const cores = availableParallelism()
  const [quota, period] = (cgroupCpuMax ?? '').trim().split(/\s+/)
  const q = Number(quota)
  const p = Number(period)
  if (!(q > 0 && p > 0)) return cores // 'max' (no quota), or no cgroup v2 file
  return Math.max(1, Math.min(cores, Math.ceil(q / p)))
}

/**
 * Physical cores (hyper-threads of one core count once), from the kernel's CPU topology;
 * onnxruntime's own default intra-op thread count is this. Unknown: the logical count.
 */
export function physicalCores(root = '/sys/devices/system/cpu'): number {
  try {
    const cores = new Set<string>()
    for (const cpu of readdirSync(root).filter((d) => /^cpu\d+$/.test(d))) {
      const t = `${root}/${cpu}/topology`
      const core = readOr(`${t}/core_id`)
      if (core === undefined) continue // offline
      cores.add(`${readOr(`${t}/physical_package_id`)?.trim()}:${core.trim()}`)
    }
    return cores.size || availableParallelism()
  } catch {
    return availableParallelism()
  }
}

/**
 * onnxruntime's intra-op threads for a runner's local CPU workers when it sets neither
 * intraOpThreads nor resources.cpu: the usable cores less one, which the API process needs for
 * HTTP, decoding and batching, shared among the workers; at least 1, at most the physical cores
 * (onnxruntime's default). onnxruntime's default alone takes every core, and its threads then
 * compete with the API process for the one it is using (docs/defaults.md, "Model threads").
 */
export function defaultIntraOpThreads(workers: number, cores = usableCores(), physical = physicalCores()): number {
  return Math.max(1, Math.min(physical, Math.floor((cores - 1) / Math.max(1, workers))))
}

/**
 * The memory this process may use: the machine's, less where a cgroup limit (a container's) allows
 * less. Node reports no limit as a huge number.
 */
export function usableMemory(constrained = process.constrainedMemory?.()): number {
  const total = totalmem()
  return constrained && constrained > 0 ? Math.min(total, constrained) : total
}

/** Workers of a local CPU runner that sets none: one runs a batch while the other takes the next. */
export const CPU_WORKERS = 2

/**
 * The second worker holds a second copy of the model: only while a copy is at most this share of
 * the usable memory (a 1.5 GiB model on 24 GiB; 128 MiB in a 2 GiB container).
 */
export const SECOND_COPY_SHARE = 1 / 16

/**
 * Local CPU workers a runner starts with when it sets neither workers, minWorkers, maxWorkers nor
 * resources.cpu: two where the second costs a lone request nothing — the cores less one leave a
 * single worker one thread anyway (two cores, or one core of two hyper-threads) — and memory
 * holds a second copy of the model; else one. With one worker of one thread, the model's core
 * idles whenever that worker is between batches (taking one in, handing one back) and the API
 * process's core whenever the API has less to do than the model: measured on two cores, a
 * quarter of the machine sat idle at 32 connections, and two workers served the tensor route
 * 1.4-1.7x faster (docs/defaults.md, "Workers"). Where one worker would get several threads, a
 * second would halve them for a lone request: not measured yet, so one (`bundle tune` measures it).
 */
export function defaultCpuWorkers(
  modelBytes: number,
  cores = usableCores(),
  memory = usableMemory(),
  physical = physicalCores(),
): number {
  if (cores < 2 || defaultIntraOpThreads(1, cores, physical) > 1) return 1
  return modelBytes > memory * SECOND_COPY_SHARE ? 1 : CPU_WORKERS
}

/**
 * The intra-op threads a runner's workers open their sessions with (undefined: onnxruntime's
 * default, as on a GPU), and whether the API process may stay awake for a lone call's answer:
 * that spin takes a core, so on the CPU only while the threads of the one worker a lone call
 * runs on leave one free (measured: with onnxruntime on every core, a lone tensor request took
 * 5.6 ms instead of 2.0).
 */
export function modelThreads(
  o: { intraOpThreads?: number | undefined; cpu?: number | undefined; onCpu: boolean; workers: number },
  cores = usableCores(),
  physical = physicalCores(),
): { threads: number | undefined; answerAwake: boolean } {
  const given = o.intraOpThreads ?? (o.cpu ? Math.max(1, Math.ceil(o.cpu)) : undefined)
  // A GPU runner leaves the cores free; onnxruntime picks its threads unless told.
  if (!o.onCpu) return { threads: given, answerAwake: true }
  const threads = given ?? defaultIntraOpThreads(o.workers, cores, physical)
  return { threads, answerAwake: threads < cores }
}

function readOr(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return undefined
  }
}
