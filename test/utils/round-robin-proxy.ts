// A round-robin HTTP proxy in front of local replicas, as a Kubernetes Service spreads requests
// over the ready pods of a Deployment: bench:autoscale and the scale-down test run it. Replicas
// join and leave while it serves (PUT /__backends, as endpoints change); one that leaves gets no
// new request, and those it is answering finish. It answers what the replica answered and counts
// every answer by status, so "no request failed while a replica left" is something to read.
//
// Run on its own (`node --import tsx test/utils/round-robin-proxy.ts`) it prints
// {"msg":"listening","url":…} on stdout, as bundle serve does, so it is a process of its own.
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'

export interface ProxyStats {
  /** Answers sent to clients, by status (502: a replica failed to answer). */
  statuses: Record<string, number>
  /** Requests each replica is answering now, and has answered. */
  inFlight: Record<string, number>
  answered: Record<string, number>
  backends: string[]
}

export interface RoundRobinProxy {
  url: string
  server: Server
  setBackends(urls: string[]): void
  stats(): ProxyStats
  close(): Promise<void>
}

/** Proxy control routes: not forwarded. */
const CONTROL = '/__'

export function startProxy(port = 0): Promise<RoundRobinProxy> {
  // Keep-alive to each replica, as a balancer's connection pool; enough sockets for the load.
  const agent = new Agent({ keepAlive: true, maxSockets: 512 })
  let backends: string[] = []
  let next = 0
  const statuses: Record<string, number> = {}
  const inFlight: Record<string, number> = {}
  const answered: Record<string, number> = {}
  const count = (status: number) => void (statuses[status] = (statuses[status] ?? 0) + 1)
  const stats = (): ProxyStats => ({
    statuses: { ...statuses },
    inFlight: { ...inFlight },
    answered: { ...answered },
    backends: [...backends],
  })

  const control = (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url === '/__stats') return res.end(JSON.stringify(stats()))
    if (req.method === 'PUT' && req.url === '/__backends') {
      let body = ''
      req.on('data', (c: Buffer) => void (body += c))
      req.on('end', () => {
        backends = JSON.parse(body) as string[]
        res.end(JSON.stringify(stats()))
      })
      return
    }
    res.statusCode = 404
    res.end()
  }

  const forward = (req: IncomingMessage, res: ServerResponse) => {
    if (backends.length === 0) {
      count(503)
      res.writeHead(503, { 'retry-after': '1' }).end('no replica is ready')
      return
    }
    const target = backends[next++ % backends.length]!
    inFlight[target] = (inFlight[target] ?? 0) + 1
    let done = false
    const finish = (status: number) => {
      if (done) return
      done = true
      inFlight[target]!--
      answered[target] = (answered[target] ?? 0) + 1
      count(status)
    }
    // The body is read whole first, so a request can be sent again: a kept-alive connection the
    // replica closed just as it was reused fails before any answer (Node's documented race), and
    // such a request never reached the replica — a balancer retries it, as this one does once.
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => send(Buffer.concat(chunks), true))
    const send = (body: Buffer, mayRetry: boolean) => {
      const up = request(`${target}${req.url}`, { method: req.method, headers: req.headers, agent }, (upRes) => {
        res.writeHead(upRes.statusCode!, upRes.headers)
        upRes.pipe(res)
        upRes.on('end', () => finish(upRes.statusCode!))
        upRes.on('error', () => finish(502))
      })
      up.on('error', (e: NodeJS.ErrnoException) => {
        if (mayRetry && up.reusedSocket && e.code === 'ECONNRESET' && !res.headersSent) return send(body, false)
        finish(502)
        if (!res.headersSent) res.writeHead(502).end(`replica ${target}: ${e.message}`)
        else res.destroy()
      })
      up.end(body)
    }
  }

  const server = createServer((req, res) => (req.url?.startsWith(CONTROL) ? control(req, res) : forward(req, res)))
  server.keepAliveTimeout = 60_000
  return new Promise((resolve) => {
    server.listen(port, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      resolve({
        url,
        server,
        setBackends: (urls) => void (backends = [...urls]),
        stats,
        close: () =>
          new Promise<void>((done) => {
            agent.destroy()
            server.closeAllConnections()
            server.close(() => done())
          }),
      })
    })
  })
}

/** Replaces the replicas a proxy process sends to (its PUT /__backends). */
export async function putBackends(proxyUrl: string, urls: string[]): Promise<ProxyStats> {
  const r = await fetch(`${proxyUrl}/__backends`, { method: 'PUT', body: JSON.stringify(urls) })
  return (await r.json()) as ProxyStats
}

/** A proxy process's counts (its GET /__stats). */
export async function proxyStats(proxyUrl: string): Promise<ProxyStats> {
  return (await (await fetch(`${proxyUrl}/__stats`)).json()) as ProxyStats
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const proxy = await startProxy(Number(process.env.PORT ?? 0))
  process.stdout.write(`${JSON.stringify({ msg: 'listening', url: proxy.url })}\n`)
  process.on('SIGTERM', () => void proxy.close().then(() => process.exit(0)))
}
