import { Agent, request } from 'node:http'

// An open-loop load generator: requests start on a fixed schedule whatever the server does, as
// independent users would send them (a closed loop slows down with the server and so can never
// offer more than it serves). Every request is accounted for: an answer, a connection error
// (status 0) or a client-side timeout (status -1).

export interface Answer {
  status: number
  /** Milliseconds from sending to the end of the answer. */
  ms: number
  /** The error code of a JSON error answer. */
  code?: string
}

export interface OpenLoopOptions {
  url: string
  headers?: Record<string, string>
  body: Uint8Array
  /** Requests per second. */
  rate: number
  durationMs: number
  /** A request with no answer after this long counts as hung (status -1). */
  timeoutMs: number
}

export async function openLoop(o: OpenLoopOptions): Promise<{ sent: number; answers: Answer[] }> {
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity })
  const target = new URL(o.url)
  const headers = { ...(o.headers ?? {}), 'content-length': String(o.body.byteLength) }
  const pending: Promise<Answer>[] = []
  const one = (): Promise<Answer> =>
    new Promise((resolve) => {
      const t = performance.now()
      let done = false
      const finish = (a: Answer) => {
        if (done) return
        done = true
        clearTimeout(timer)
        resolve(a)
      }
      const req = request(
        { hostname: target.hostname, port: target.port, path: target.pathname, method: 'POST', headers, agent },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c))
          res.on('end', () => {
            let code: string | undefined
            if ((res.statusCode ?? 0) >= 400) {
              try {
                code = (JSON.parse(Buffer.concat(chunks).toString()) as { error?: { code?: string } }).error?.code
              } catch {
                code = 'not JSON'
              }
            }
            finish({ status: res.statusCode ?? 0, ms: performance.now() - t, code })
          })
          res.on('error', () => finish({ status: 0, ms: performance.now() - t }))
        },
      )
      const timer = setTimeout(() => (finish({ status: -1, ms: performance.now() - t }), req.destroy()), o.timeoutMs)
      req.on('error', () => finish({ status: 0, ms: performance.now() - t }))
      req.end(o.body)
    })
  const start = performance.now()
  let sent = 0
  while (performance.now() - start < o.durationMs) {
    const due = Math.floor(((performance.now() - start) / 1000) * o.rate)
    for (; sent < due; sent++) pending.push(one())
    await new Promise((r) => setTimeout(r, 2)) // pacing: sends by the clock, whatever the answers do
  }
  const answers = await Promise.all(pending)
  agent.destroy()
  return { sent, answers }
}

export const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN
}
