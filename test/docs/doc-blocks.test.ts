// test-slot: long
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { blocksOf, type DocBlock, docPages, isScript, withPorts } from '../utils/doc-blocks.js'
import { freePort } from '../utils/port.js'
import { tempDir } from '../utils/tmp.js'
import { until } from '../utils/until.js'

// Every shell and TypeScript block of the README and docs/ that claims to run is run here: a
// page's shell blocks in order, in a shell of their own with a fresh store ($BUNDLE_HOME) and
// free ports in place of 3000 and 8001, from the repository's root as a reader of a clone runs
// them (in a directory linking to the clone's, so files they write stay out of it; $DOCS_TMP is
// a scratch directory); a block marked <!-- server --> is started in the background and the later blocks talk
// to it. `curl` fails on an HTTP error unless the block prints the status itself (-w). Every
// TypeScript block is compiled as a user's file, importing 'modelbundle'; a script (a block that
// declares no export and no decorated class) also runs, with tsx, in its place on the page. The few that cannot
// run say why (<!-- not run: … -->); test/utils/doc-blocks.ts has the marks.

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const pages = docPages(REPO)
const blocks = pages.flatMap((p) => blocksOf(REPO, p))
const where = (b: DocBlock) => `${b.file}:${b.line}`

const PRELUDE = `set -euo pipefail
curl() {
  case " $* " in *" -w "*|*" --write-out "*) command curl "$@" ;; *) command curl --fail-with-body "$@" ;; esac
}
`

/** Runs shell text to its end; rejects with its output's tail when it fails. */
function run(text: string, env: NodeJS.ProcessEnv, label: string, ms = 240_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', PRELUDE + text], { cwd: env.DOCS_CWD, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), ms)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve(out)
      else reject(new Error(`${label} exited ${code ?? signal}:\n${out.slice(-3000)}`))
    })
  })
}

/**
 * A directory that looks like the clone's root (each top-level entry a link to the real one), so
 * blocks run as from a clone while the files they write (`> quickstart.yaml`) land here.
 */
function cloneLike(dir: string): string {
  mkdirSync(dir, { recursive: true })
  for (const entry of readdirSync(REPO))
    if (!['.git', '.bundle-home', '.scratch'].includes(entry)) symlinkSync(join(REPO, entry), join(dir, entry))
  return dir
}

/** A server block in the background (its own process group, so its children stop with it). */
class Background {
  private child: ChildProcess | undefined
  private out = ''

  start(text: string, env: NodeJS.ProcessEnv): void {
    this.out = ''
    this.child = spawn('bash', ['-c', PRELUDE + text], {
      cwd: env.DOCS_CWD,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.child.stdout!.on('data', (d) => (this.out = (this.out + d).slice(-20_000)))
    this.child.stderr!.on('data', (d) => (this.out = (this.out + d).slice(-20_000)))
  }

  output(): string {
    return this.out.slice(-3000)
  }

  exited(): boolean {
    return this.child === undefined || this.child.exitCode !== null || this.child.signalCode !== null
  }

  async stop(): Promise<void> {
    const child = this.child
    if (!child || this.exited()) return
    const gone = new Promise((resolve) => child.once('close', resolve))
    process.kill(-child.pid!, 'SIGTERM')
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 30_000)
    await gone
    clearTimeout(timer)
    this.child = undefined
  }
}

async function ready(port: number, server: Background, label: string): Promise<void> {
  await until(
    `${label} ready`,
    async () => {
      if (server.exited()) throw new Error(`${label} exited:\n${server.output()}`)
      const r = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined)
      return r?.status === 200
    },
    180_000,
  )
}

describe('the code blocks of the README and docs/', () => {
  it('each is run or compiled here, or says why it cannot be', () => {
    assert.ok(blocks.length > 20, `${blocks.length} blocks found`)
    const notRun = blocks.filter((b) => b.mark.kind === 'not run')
    // The exceptions stay few: most blocks run.
    assert.ok(notRun.length * 4 < blocks.length, `${notRun.length} of ${blocks.length} blocks are not run`)
    for (const b of blocks) {
      if (b.mark.kind === 'fragment') assert.equal(b.lang, 'ts', `${where(b)}: only TypeScript is a fragment`)
      if (b.mark.kind === 'server' || b.mark.kind === 'background')
        assert.equal(b.lang, 'sh', `${where(b)}: a server is a shell block`)
    }
  })

  it('the README guides (at most 300 lines); the architecture is described once, in docs/architecture.md', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8').split('\n').length
    assert.ok(readme <= 300, `README.md has ${readme} lines`)
    for (const folder of ['framework', 'runners', 'builder', 'store', 'cli'])
      assert.equal(existsSync(join(REPO, folder, 'README.md')), false, `${folder}/README.md: see docs/architecture.md`)
  })

  it('every link to a file of the repository leads to one', () => {
    const broken = pages.flatMap((page) => {
      // Inline code (a name's pattern, say) is not a link.
      const text = readFileSync(page, 'utf8').replace(/`[^`\n]*`/g, '')
      return [...text.matchAll(/\]\(([^)\s#]+)(#[^)\s]*)?\)/g)]
        .map((m) => m[1]!)
        .filter((target) => /^[\w./-]+$/.test(target) && !existsSync(join(dirname(page), target)))
        .map((target) => `${page.slice(REPO.length)}: ${target}`)
    })
    assert.deepEqual(broken, [])
  })

  it('every TypeScript block compiles as a file of a user of the package', () => {
    const ours = blocks.filter((b) => b.lang === 'ts' && b.mark.kind === 'run')
    assert.ok(ours.length > 0)
    // Each block is a file at the repository's root (its relative imports resolve as in a clone).
    const files = new Map(ours.map((b) => [join(REPO, `.doc-${b.file.replace(/\W/g, '-')}-${b.line}.ts`), b]))
    const options: ts.CompilerOptions = {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ['node'],
      paths: {
        modelbundle: [join(REPO, 'framework/index.ts')],
        'modelbundle/store': [join(REPO, 'store/index.ts')],
      },
    }
    const host = ts.createCompilerHost(options)
    const read = host.readFile.bind(host)
    host.readFile = (f) => files.get(f)?.text ?? read(f)
    host.fileExists = (f) => files.has(f) || ts.sys.fileExists(f)
    const getSource = host.getSourceFile.bind(host)
    host.getSourceFile = (f, lang, ...rest) => {
      const b = files.get(f)
      return b ? ts.createSourceFile(f, b.text, lang) : getSource(f, lang, ...rest)
    }
    const program = ts.createProgram([...files.keys()], options, host)
    const problems = [...files].flatMap(([f, b]) => {
      const source = program.getSourceFile(f)!
      const d = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]
      return d.map(
        (x) =>
          `${where(b)} (+${source.getLineAndCharacterOfPosition(x.start ?? 0).line + 1}): ` +
          ts.flattenDiagnosticMessageText(x.messageText, '\n'),
      )
    })
    assert.deepEqual(problems, [])
  })

  for (const page of pages) {
    const runnable = blocksOf(REPO, page).filter((b) => (b.lang === 'sh' && b.mark.kind !== 'not run') || isScript(b))
    if (runnable.length === 0) continue
    it(`${runnable[0]!.file}: its blocks run, in order`, { timeout: 900_000 }, async () => {
      const http = await freePort()
      const grpc = await freePort()
      const home = tempDir('mb-docs-')
      const cwd = cloneLike(join(home, 'clone'))
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        BUNDLE_HOME: join(home, 'store'),
        PATH: `${join(REPO, 'bin')}:${process.env.PATH}`,
        PORT: String(http),
        DOCS_TMP: home,
        DOCS_CWD: cwd,
      }
      const server = new Background()
      const background: Background[] = []
      after(() => Promise.all([server, ...background].map((x) => x.stop())))
      try {
        for (const b of runnable) {
          if (b.lang === 'ts') {
            // A script: run as a user runs one, with tsx, its localhost:3000 the page's server.
            const file = `doc-block-${b.line}.ts`
            writeFileSync(join(cwd, file), withPorts(b.text, http, grpc))
            await run(`node --import tsx ${file}`, env, where(b))
            continue
          }
          const text = withPorts(b.text, http, grpc)
          if (b.mark.kind === 'server') {
            await server.stop()
            server.start(text, env)
            await ready(http, server, where(b))
          } else if (b.mark.kind === 'background') {
            const x = new Background()
            x.start(text, env)
            background.push(x)
          } else await run(text, env, where(b))
        }
      } finally {
        await Promise.all([server, ...background].map((x) => x.stop()))
      }
    })
  }
})
