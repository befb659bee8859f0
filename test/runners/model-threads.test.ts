import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { availableParallelism, totalmem } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import {
  defaultCpuWorkers,
  defaultIntraOpThreads,
  modelThreads,
  physicalCores,
  usableCores,
  usableMemory,
} from '../../runners/onnx/threads.js'
import { tempDir } from '../utils/tmp.js'

describe('usableCores', () => {
  it('is the cores this process may run on, fewer under a cgroup CPU quota', () => {
    const n = availableParallelism()
    assert.equal(usableCores(undefined), n)
    assert.equal(usableCores('max 100000\n'), n)
    assert.equal(usableCores('100000 100000\n'), 1)
    assert.equal(usableCores('50000 100000'), 1) // half a core: one thread
    assert.equal(usableCores('150000 100000'), Math.min(n, 2))
    assert.equal(usableCores('6400000 100000'), n) // a quota above the machine: the machine
    assert.equal(usableCores('garbage'), n)
  })
})

describe('physicalCores', () => {
  /** A /sys/devices/system/cpu tree: each entry [package, core], or undefined for an offline CPU. */
  function sysfs(cpus: ([number, number] | undefined)[]): string {
    const root = tempDir('mb-cpu-')
    cpus.forEach((c, i) => {
      const t = join(root, `cpu${i}`, 'topology')
      mkdirSync(t, { recursive: true })
      if (c === undefined) return
      writeFileSync(join(t, 'physical_package_id'), `${c[0]}\n`)
      writeFileSync(join(t, 'core_id'), `${c[1]}\n`)
    })
    mkdirSync(join(root, 'cpufreq')) // not a CPU
    return root
  }

  it('counts hyper-threads of one core once, across packages, skipping offline CPUs', () => {
    assert.equal(
      physicalCores(
        sysfs([
          [0, 0],
          [0, 1],
        ]),
      ),
      2,
    )
    assert.equal(
      physicalCores(
        sysfs([
          [0, 0],
          [0, 0],
          [0, 1],
          [0, 1],
        ]),
      ),
      2,
    )
    assert.equal(physicalCores(sysfs([[0, 0], [1, 0], undefined])), 2)
  })

  it('without a topology to read, is the logical count', () => {
    assert.equal(physicalCores('/nonexistent/cpu'), availableParallelism())
  })
})

describe('defaultIntraOpThreads', () => {
  it('leaves one core to the API process and shares the rest among the workers, at most the physical cores', () => {
    assert.equal(defaultIntraOpThreads(1, 2, 2), 1) // the bench machine: 2 cores
    assert.equal(defaultIntraOpThreads(1, 2, 1), 1) // one core, two hyper-threads
    assert.equal(defaultIntraOpThreads(1, 8, 8), 7)
    assert.equal(defaultIntraOpThreads(1, 8, 4), 4) // onnxruntime's own default is the smaller
    assert.equal(defaultIntraOpThreads(2, 8, 8), 3)
    assert.equal(defaultIntraOpThreads(4, 2, 2), 1) // never none
    assert.equal(defaultIntraOpThreads(1, 1, 1), 1)
  })
})

describe('modelThreads', () => {
  it('takes intraOpThreads, else resources.cpu, else the default on the CPU, else onnxruntime’s own', () => {
    assert.equal(modelThreads({ intraOpThreads: 3, cpu: 2, onCpu: true, workers: 1 }, 8, 8).threads, 3)
    assert.equal(modelThreads({ cpu: 1.5, onCpu: true, workers: 1 }, 8, 8).threads, 2)
    assert.equal(modelThreads({ onCpu: true, workers: 1 }, 8, 8).threads, 7)
    assert.equal(modelThreads({ onCpu: false, workers: 1 }, 8, 8).threads, undefined)
  })

  it('lets the API process stay awake for an answer only where the worker a lone call runs on leaves it a core', () => {
    assert.equal(modelThreads({ onCpu: true, workers: 1 }, 2, 2).answerAwake, true) // 1 thread of 2 cores
    assert.equal(modelThreads({ onCpu: true, workers: 2 }, 2, 2).answerAwake, true) // the default: 2 of 1 thread
    assert.equal(modelThreads({ intraOpThreads: 2, onCpu: true, workers: 1 }, 2, 2).answerAwake, false)
    // Two workers of one thread on two cores: a lone call runs on one of them, a core stays free.
    assert.equal(modelThreads({ intraOpThreads: 1, onCpu: true, workers: 2 }, 2, 2).answerAwake, true)
    assert.equal(modelThreads({ cpu: 1, onCpu: true, workers: 2 }, 2, 2).answerAwake, true)
    assert.equal(modelThreads({ intraOpThreads: 4, onCpu: true, workers: 2 }, 4, 4).answerAwake, false)
    assert.equal(modelThreads({ cpu: 2, onCpu: true, workers: 1 }, 2, 2).answerAwake, false)
    assert.equal(modelThreads({ onCpu: false, workers: 4 }, 2, 2).answerAwake, true) // a GPU leaves the cores
  })
})

describe('defaultCpuWorkers', () => {
  const GiB = 2 ** 30
  it('is two where one worker would get a single thread and a second model copy is a small share of memory', () => {
    assert.equal(defaultCpuWorkers(1 << 20, 2, 24 * GiB, 2), 2) // two cores
    assert.equal(defaultCpuWorkers(1 << 20, 4, 24 * GiB, 1), 2) // one core, hyper-threads: one thread anyway
    assert.equal(defaultCpuWorkers(1.5 * GiB, 2, 24 * GiB, 2), 2)
  })

  it('is one on one core, where one worker gets several threads, or for a model over a sixteenth of memory', () => {
    assert.equal(defaultCpuWorkers(1 << 20, 1, 24 * GiB, 1), 1)
    assert.equal(defaultCpuWorkers(1 << 20, 4, 24 * GiB, 4), 1) // a lone request keeps its 3 threads
    assert.equal(defaultCpuWorkers(1 << 20, 16, 24 * GiB, 16), 1)
    assert.equal(defaultCpuWorkers(1.6 * GiB, 2, 24 * GiB, 2), 1)
    assert.equal(defaultCpuWorkers(200 << 20, 2, 2 * GiB, 2), 1) // a 2 GiB container
  })
})

describe('usableMemory', () => {
  it('is the machine’s memory, less under a cgroup limit; no limit is a huge number', () => {
    assert.equal(usableMemory(undefined), totalmem())
    assert.equal(usableMemory(2 ** 64), totalmem())
    assert.equal(usableMemory(1 << 30), Math.min(totalmem(), 1 << 30))
  })
})
