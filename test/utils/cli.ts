import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export const BIN = fileURLToPath(new URL('../../bin/bundle', import.meta.url))

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs the real launcher (compiled CLI) as a child process, stdin closed (no terminal). */
export function bundle(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c) => (stdout += c))
    child.stderr.on('data', (c) => (stderr += c))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** One bundle as `bundle list -o json` and `bundle build -o json` print it. */
export interface Listed {
  tag: string
  name: string
  version: string
  digest: string
  models: { tag: string; digest: string; requested?: string[] }[]
  labels: Record<string, string>
  created: string
}
