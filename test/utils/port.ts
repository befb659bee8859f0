import type { ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'

/**
 * A TCP port the OS just handed out and released, for a process that must be told its port
 * before it starts (Redis, Prometheus, a reloading server that keeps it across restarts). Not a
 * random pick: two tests, or a test and anything else on the machine, do not collide on it.
 * Where the process can say its own port, prefer `--port 0` and listeningUrl().
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}

/**
 * The URL a `bundle serve … --port 0` child listens on, read from its "listening" log line
 * (its stdout must be a pipe). Its stdout keeps being read afterwards (into `onOutput`, if given),
 * so the child never blocks on a full pipe.
 */
export function listeningUrl(child: ChildProcess, onOutput?: (chunk: string) => void, ms = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = ''
    let found = false
    const timer = setTimeout(() => fail(new Error(`no "listening" line within ${ms} ms: ${buf.slice(-2000)}`)), ms)
    const fail = (err: Error) => {
      clearTimeout(timer)
      if (!found) reject(err)
    }
    child.stdout!.on('data', (c: Buffer) => {
      const s = c.toString()
      onOutput?.(s)
      if (found) return
      buf += s
      const m = /"url":"([^"]+)".*"msg":"listening"|"msg":"listening".*"url":"([^"]+)"/.exec(buf)
      if (m) {
        found = true
        clearTimeout(timer)
        resolve(m[1] ?? m[2]!)
      }
    })
    child.once('exit', (code) => fail(new Error(`the server exited (${code}) before it listened: ${buf.slice(-2000)}`)))
  })
}
