import { readdirSync, readFileSync } from 'node:fs'
import WebSocket from 'ws'

// What a process holds, read from /proc (Linux): for fault, overload and soak tests.

/** Direct child processes of `parent`. */
export function childrenOf(parent = process.pid): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent
      } catch {
        return false // gone meanwhile
      }
    })
}

/** Child processes of `parent` whose command line names a worker of `runner` (`bundle-runner-worker NAME#i`). */
export function runnerWorkers(runner: string, parent = process.pid): number[] {
  return childrenOf(parent).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`bundle-runner-worker ${runner}#`)
    } catch {
      return false
    }
  })
}

/** Open file descriptors of a process. */
export const openFds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length

/** Resident memory of a process in MiB. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) / 1024 : NaN
}

/**
 * A full garbage collection in a process started with `--inspect=127.0.0.1:PORT`, asked through
 * its inspector (HeapProfiler.collectGarbage): memory read after it is what the process holds,
 * not what garbage it has yet to collect.
 */
export async function collectGarbage(inspectorPort: number): Promise<void> {
  const [target] = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json/list`)).json()) as {
    webSocketDebuggerUrl: string
  }[]
  const ws = new WebSocket(target!.webSocketDebuggerUrl)
  try {
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' })))
      ws.on('message', (m) => (JSON.parse(String(m)) as { id?: number }).id === 1 && resolve())
      ws.once('error', reject)
    })
  } finally {
    ws.close()
  }
}

export { until } from './until.js'
