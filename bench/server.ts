// Servers under test, each in a process of its own: started, waited for, and named by the URL
// from their "listening" line (bundle serve's pino line, or the fixtures' own JSON line).
import { spawn, type ChildProcess } from 'node:child_process'
import { listeningUrl } from '../test/utils/port.js'

export interface Server {
  child: ChildProcess
  url: string
}

/** Runs `node ARGS` and resolves with its URL once it logs "listening"; its stdout keeps draining (the access log). */
export async function startServer(
  args: string[],
  env: Record<string, string> = {},
  stderr: 'inherit' | 'ignore' = 'inherit',
): Promise<Server> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', stderr], env: { ...process.env, ...env } })
  const url = await listeningUrl(child).catch((e: unknown) => (child.kill('SIGKILL'), Promise.reject(e)))
  return { child, url }
}

/**
 * Resolves once GET /readyz answers and is not a 5xx (a fixture without /readyz answers 404: it is
 * ready once it listens).
 */
export async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    const r = await fetch(`${url}/readyz`).catch(() => undefined)
    if (r && r.status < 500) return
    await new Promise((res) => setTimeout(res, 100))
  }
  throw new Error(`${url} never became ready`)
}
