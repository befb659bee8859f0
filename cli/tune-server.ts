import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

// The servers bundle tune measures: `bundle serve` in a process of its own per candidate.

const BIN = fileURLToPath(new URL('../../bin/bundle', import.meta.url))

export interface Served {
  url: string
  stop(): Promise<void>
}

/** `bundle serve ENTRY --port 0 [--config FILE]`, once ready; or why it did not start (or not before `deadline`). */
export async function start(entry: string, config: string | undefined, deadline: number): Promise<Served | string> {
  const child = spawn(process.execPath, [BIN, 'serve', entry, '--port', '0', ...(config ? ['--config', config] : [])], {
    env: { ...process.env, BUNDLE_ACCESS_LOG: '0', GRPC_PORT: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  const stop = async () => {
    child.kill('SIGTERM')
    const t = setTimeout(() => child.kill('SIGKILL'), 5_000)
    await exited
    clearTimeout(t)
  }
  let out = ''
  child.stdout.on('data', (c: Buffer) => void (out = (out + c.toString()).slice(-8192)))
  child.stderr.on('data', (c: Buffer) => void (out = (out + c.toString()).slice(-8192)))
  let url: string | undefined
  for (;;) {
    const m = url
      ? undefined
      : /"url":"(http[^"]+)".*"msg":"listening"|"msg":"listening".*"url":"(http[^"]+)"/.exec(out)
    if (m) url = m[1] ?? m[2]!
    if (url) {
      const ready = await fetch(`${url}/readyz`).catch(() => undefined)
      if (ready?.status === 200) return { url, stop }
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      const line = /"msg":"start-up failed: ([^"]+)"/.exec(out)?.[1] ?? out.trim().split('\n').pop() ?? ''
      return `the server did not start: ${line}`
    }
    if (Date.now() > deadline) {
      await stop()
      return 'the server was not ready in time'
    }
    await new Promise((r) => setTimeout(r, 100))
  }
}
