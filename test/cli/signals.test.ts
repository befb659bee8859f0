import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { childrenOf, until } from '../utils/procs.js'

// Under a process manager the server is stopped by signalling the process it started: `npm
// start` or `npx bundle serve`. The server and its runner workers must drain and go, never
// keep serving as orphans.

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** Every process below `pid`, found through /proc. */
function descendants(pid: number): number[] {
  const direct = childrenOf(pid)
  return [...direct, ...direct.flatMap(descendants)]
}

/** Still running (a zombie, exited but not yet reaped by its parent, counts as gone). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

/** Starts `cmd args` and resolves once its output has a line matching `ready`; collects stdout. */
function startUntil(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: Record<string, string> },
  ready: RegExp,
): Promise<{ child: ChildProcess; out: () => string; exited: Promise<number | null> }> {
  const child = spawn(cmd, args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)))
  return new Promise((resolve_, reject) => {
    const take = (c: Buffer) => {
      out += c
      if (ready.test(out)) resolve_({ child, out: () => out, exited })
    }
    child.stdout!.on('data', take)
    child.stderr!.on('data', take)
    void exited.then((code) => reject(new Error(`${cmd} exited with ${code} before it was ready: ${out}`)))
  })
}

describe('stopping a server started through npm', () => {
  it('SIGTERM to `npm start` drains the server and its runner workers; npm exits 0, nothing is left running', {
    timeout: 120_000,
  }, async () => {
    const home = mkdtempSync(join(tmpdir(), 'mb-npm-start-'))
    try {
      const s = await startUntil(
        'npm',
        ['start'],
        { cwd: ROOT, env: { BUNDLE_HOME: home, PORT: '0', BUNDLE_ACCESS_LOG: '0' } },
        /"msg":"service ready"/,
      )
      const below = descendants(s.child.pid!)
      assert.ok(below.length >= 2, `the server and its runner worker run below npm: ${below}`)
      s.child.kill('SIGTERM')
      assert.equal(await s.exited, 0, s.out())
      await until('every process below npm has exited', () => below.every((p) => !alive(p)), 30_000)
      assert.match(s.out(), /"msg":"stopped"/, 'the server drained and stopped')
    } finally {
      rmSync(home, { recursive: true, force: true })
    }
  })

  it('SIGTERM to `npx bundle serve` stops the server too (it follows its parent away)', {
    timeout: 120_000,
  }, async () => {
    // A project with modelbundle's command installed, as `npm install modelbundle` leaves it.
    const project = mkdtempSync(join(tmpdir(), 'mb-npx-'))
    try {
      writeFileSync(
        join(project, 'package.json'),
        JSON.stringify({ name: 'npx-project', private: true, type: 'module' }),
      )
      mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true })
      symlinkSync(resolve(ROOT, 'bin/bundle'), join(project, 'node_modules', '.bin', 'bundle'))
      const s = await startUntil(
        'npx',
        ['bundle', 'serve', resolve(ROOT, 'examples/greeter/service.ts'), '--port', '0'],
        { cwd: project, env: { BUNDLE_HOME: join(project, 'home'), BUNDLE_ACCESS_LOG: '0' } },
        /"msg":"service ready"/,
      )
      const below = descendants(s.child.pid!)
      assert.ok(below.length >= 1, 'the server runs below npx')
      s.child.kill('SIGTERM')
      await s.exited
      await until('the server below npx has exited', () => below.every((p) => !alive(p)), 30_000)
      assert.match(s.out(), /"msg":"stopped"/, 'it drained and stopped, as on SIGTERM')
    } finally {
      rmSync(project, { recursive: true, force: true })
    }
  })
})
