import { readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Puts a signature file (model.sig, bundle.sig) beside a checkout's files, or removes a stale one
 * when `text` is undefined. Checkouts are shared by every model or bundle of the same content, so
 * the file is replaced by rename — a reader never sees half of it, and a write never goes through
 * a hard link into a blob. False when the store cannot be written (read-only): the caller says so.
 */
export function layOutSignature(dir: string, name: string, text: string | undefined): boolean {
  const file = join(dir, name)
  try {
    let now: string | undefined
    try {
      now = readFileSync(file, 'utf8')
    } catch {
      now = undefined
    }
    if (now === text) return true
    if (text === undefined) {
      unlinkSync(file)
      return true
    }
    const tmp = join(dir, `.${name}.${process.pid}.${Date.now()}`)
    writeFileSync(tmp, text, { mode: 0o444 })
    renameSync(tmp, file)
    return true
  } catch {
    return false
  }
}
