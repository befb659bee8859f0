import { randomBytes } from 'node:crypto'
import { closeSync, fsyncSync, openSync, renameSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { BundleError, isBundleError, ignore } from '../errors/index.js'

/** Makes a rename durable: the directory entry itself must reach the disk. */
export function fsyncDir(dir: string): void {
  let fd: number | undefined
  try {
    fd = openSync(dir, 'r')
    fsyncSync(fd)
  } catch {
    // Some file systems refuse fsync on directories; the data itself was already synced.
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

export const HOST = hostname()

/**
 * Temp names carry the writer's pid so `gc` can tell a live writer's file from a crashed one's.
 * Format: `<pid>-<random>.<suffix>`.
 */
export function tempName(tmpDir: string, suffix: string): string {
  return join(tmpDir, `${process.pid}-${randomBytes(6).toString('hex')}.${suffix}`)
}

export function pidOfTempName(name: string): number | undefined {
  const m = /^(\d+)-[0-9a-f]+\./.exec(name)
  return m ? Number(m[1]) : undefined
}

export function isProcessAlive(pid: number): boolean {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

export async function removeQuietly(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true }).catch(ignore('a temporary directory already gone'))
}

/** Turns filesystem errors into coded store errors that name the file. */
export function ioError(err: unknown, what: string): BundleError {
  if (isBundleError(err)) return err
  const e = err as NodeJS.ErrnoException
  if (e?.code === 'ENOSPC') return new BundleError('E_STORE_NO_SPACE', `no space left while ${what}`, { cause: err })
  return new BundleError('E_STORE_IO', `${what} failed: ${e?.code ?? ''} ${e?.message ?? String(err)}`.trim(), {
    cause: err,
  })
}

/**
 * Makes a finished file durable (fsync) and gives it its final name in one rename: readers never see it half-written.
 */
export function publish(partial: string, target: string): void {
  const fd = openSync(partial, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(partial, target)
}
