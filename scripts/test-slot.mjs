// Loaded (--import) into every test file's process by scripts/test.mjs, which runs two files at
// once: most of the run is spent waiting on child processes, sockets, npm and podman, and one
// file at a time left a third of the two cores idle. A file that measures throughput or latency
// on those cores must still run alone; it says so with a line starting `// test-slot: exclusive`.
// A file that builds container images says `// test-slot: podman`: two podman builds at once
// failed midway (a build's COPY), so such files run one at a time, each beside any shared file.
// A reader-writer lock in the directory BUNDLE_TEST_SLOTS (one per run): shared holders may run
// together, an exclusive one waits for them to finish and keeps new ones waiting meanwhile.
// Holders are files named by kind and pid; a holder that died (a killed test) no longer counts.
import {
  appendFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { join, relative } from 'node:path'

const file = process.argv[1] ?? ''
const dir = process.env.BUNDLE_TEST_SLOTS
const asked = Date.now()
if (dir && file.endsWith('.test.ts')) await acquire(dir, kindOf(readFileSync(file, 'utf8')))
// BUNDLE_TEST_TIMES=path: each file appends `seconds-run seconds-waited cpu-seconds file` when it
// exits, to find what a run spends its time on (`sort -rn path | head`; `sort -k3 -rn` by CPU).
// CPU is the file's process and the children it waited for (servers, workers, npm, podman); the
// two cores are what a run is short of, so the file that burns most is the one to make cheaper.
const times = process.env.BUNDLE_TEST_TIMES
if (times && file.endsWith('.test.ts')) {
  const started = Date.now()
  process.on('exit', () => {
    const s = (ms) => (ms / 1000).toFixed(1)
    const line = `${s(Date.now() - started)} ${s(started - asked)} ${s(cpuMs())} ${relative(process.cwd(), file)}`
    appendFileSync(times, `${line}\n`)
  })
}

/** CPU time of this process and its waited-for children, ms (/proc/self/stat, 10 ms ticks); NaN off Linux. */
function cpuMs() {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10
  } catch {
    return Number.NaN
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

/** `fn()` run holding the directory's mutex (mkdir is atomic); false if another process holds it. */
function locked(dir, fn) {
  const mutex = join(dir, 'mutex')
  try {
    mkdirSync(mutex)
  } catch {
    // A mutex older than 10 s belongs to a process that died inside these few lines.
    try {
      if (Date.now() - statSync(mutex).mtimeMs > 10_000) rmdirSync(mutex)
    } catch {
      // Gone already: the next try takes it.
    }
    return false
  }
  try {
    return fn()
  } finally {
    rmdirSync(mutex)
  }
}

/** x: alone; p: shared, but one podman file at a time; s: shared. */
function kindOf(source) {
  if (/^\/\/ test-slot: exclusive/m.test(source)) return 'x'
  return /^\/\/ test-slot: podman/m.test(source) ? 'p' : 's'
}

async function acquire(dir, kind) {
  const pid = process.pid
  const exclusive = kind === 'x'
  const me = join(dir, `${kind}-${pid}`)
  const wish = join(dir, `w-${pid}`)
  /** Takes the slot if it is free (true); an exclusive file that must wait says so (`w-`). */
  const take = () => {
    const others = readdirSync(dir)
      .map((n) => /^([spxw])-(\d+)$/.exec(n))
      .filter((m) => m && Number(m[2]) !== pid && alive(Number(m[2])))
      .map((m) => m[1])
    const free = exclusive
      ? others.length === 0 || others.every((k) => k === 'w')
      : others.every((k) => k === 's' || (k === 'p' && kind !== 'p'))
    if (free) {
      writeFileSync(me, '')
      rmSync(wish, { force: true })
    } else if (exclusive) writeFileSync(wish, '')
    return free
  }
  // A poll, not an event: the holders are other processes, and a file's wait is its neighbour's run.
  while (!locked(dir, take)) await new Promise((r) => setTimeout(r, 100))
  process.on('exit', () => rmSync(me, { force: true }))
}
