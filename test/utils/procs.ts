import { readdirSync, readFileSync } from 'node:fs'

/** Child processes of `parent` whose command line names a worker of `runner` (`bundle-runner-worker NAME#i`). */
export function runnerWorkers(runner: string, parent = process.pid): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`bundle-runner-worker ${runner}#`)
      } catch {
        return false
      }
    })
}

/** Polls until `ok()` (every 50 ms), failing with `what` after `ms`. */
export async function until(what: string, ok: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
