import { readdirSync, readFileSync } from 'node:fs'

// Resident memory of a process and all its descendants, from /proc (Linux): what a server with
// worker processes holds in all, as the kernel counts it.

const PAGE = 4096

/** The process ids below `pid` (children, their children, …). */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>()
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      // The command may hold spaces and parentheses: the fields after the last ')' are fixed.
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      parent.set(Number(d), ppid)
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = []
  const walk = (p: number) => {
    for (const [c, pp] of parent)
      if (pp === p) {
        out.push(c)
        walk(c)
      }
  }
  walk(pid)
  return out
}

/** Resident bytes of one process (0 once it is gone). */
export function rssOf(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * PAGE
  } catch {
    return 0
  }
}

/** Resident bytes of `pid` and every process below it. */
export const treeRss = (pid: number): number => [pid, ...descendants(pid)].reduce((n, p) => n + rssOf(p), 0)

/** Samples treeRss(pid) every `ms` until stopped: the highest and the last sample. */
export function sampleRss(pid: number, ms = 100): { stop(): { max: number; last: number; samples: number } } {
  let max = 0
  let last = 0
  let samples = 0
  const take = () => {
    last = treeRss(pid)
    max = Math.max(max, last)
    samples++
  }
  take()
  const timer = setInterval(take, ms)
  return {
    stop() {
      clearInterval(timer)
      take()
      return { max, last, samples }
    },
  }
}
