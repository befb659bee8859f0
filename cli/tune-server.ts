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
  const said = (c: Buffer): void => void (out = (out + c.toString()).slice(-8192))
  child.stdout.on('data', said)
  child.stderr.on('data', said)
  // The server logs its URL ("listening") and then "service ready" once its runners have started:
  // both read from its output as they come, no polling of /readyz.
  let url: string | undefined
  const ready = new Promise<void>((resolve) =>
    child.stdout.on('data', () => {
      url ??= /"url":"(http[^"]+)".*"msg":"listening"|"msg":"listening".*"url":"(http[^"]+)"/
        .exec(out)
        ?.slice(1)
        .find((u) => u !== undefined)
      if (url && /"msg":"service ready"/.test(out)) resolve()
    }),
  )
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), Math.max(0, deadline - Date.now()))))
  const outcome = await Promise.race([ready.then(() => 'ready' as const), exited.then(() => 'exited' as const), late])
  clearTimeout(timer)
  if (outcome === 'ready') return { url: url!, stop }
  if (outcome === 'exited') {
    const line = /"msg":"start-up failed: ([^"]+)"/.exec(out)?.[1] ?? out.trim().split('\n').pop() ?? ''
    return `the server did not start: ${line}`
  }
  await stop()
  return 'the server was not ready in time'
}
