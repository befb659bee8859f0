import { randomBytes } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { createGzip } from 'node:zlib'
import { BundleError, ignore } from '../../errors/index.js'
import { exportTarget } from './target.js'
import { ioError, publish } from '../fs-util.js'
import type { ModelStore } from '../model-store.js'
import type { ModelInfo, ProgressFn } from '../types.js'
import { FILES_PREFIX, MANIFEST_NAME, manifestOf } from './manifest.js'
import { TarWriter } from './tar-writer.js'
import { storedSignature } from '../signing/model-signatures.js'

export const ARCHIVE_EXTENSION = '.bundlemodel'

export function defaultArchiveName(m: Pick<ModelInfo, 'name' | 'version'>): string {
  return `${m.name}-${m.version}${ARCHIVE_EXTENSION}`
}

/**
 * Writes a model as a gzip tar: `manifest.json` first, then `files/<path>` in path order.
 * Owner, modes and mtimes are fixed, so exporting one model twice gives identical bytes.
 * The file appears under its final name only when complete.
 */
export async function exportModel(
  store: ModelStore,
  tag: string,
  out?: string,
  options: { onProgress?: ProgressFn } = {},
): Promise<{ path: string; model: ModelInfo }> {
  const model = store.get(tag)
  const target = exportTarget(out, defaultArchiveName(model))
  for (const f of model.files) {
    if (!store.blobs.has(f.sha256))
      throw new BundleError(
        'E_STORE_CORRUPT',
        `${model.tag}: file ${f.path} is missing from the store; run \`bundle models verify\``,
      )
  }
  const partial = join(dirname(target), `.${basename(target)}.${process.pid}-${randomBytes(4).toString('hex')}.part`)
  const gzip = createGzip({ level: 6 })
  const sink = createWriteStream(partial, { mode: 0o644 })
  // pipeline() owns the error events of both streams (EFBIG, ENOSPC): no unhandled 'error'.
  const written = pipeline(gzip, sink)
  written.catch(ignore('awaited below, where its failure is thrown'))
  const tar = new TarWriter(gzip, new Date(Date.parse(model.created) - (Date.parse(model.created) % 1000)))
  const total = model.size
  let done = 0
  try {
    const failed = written.then(() => new Promise<never>(() => undefined))
    failed.catch(ignore('raced below, where its failure is thrown'))
    const step = <T>(p: Promise<T>): Promise<T> => Promise.race([p, failed])
    await step(
      tar.file(
        MANIFEST_NAME,
        Buffer.from(`${JSON.stringify(manifestOf(model, storedSignature(store, model)), null, 2)}\n`),
      ),
    )
    for (const f of [...model.files].sort((a, b) => (a.path < b.path ? -1 : 1))) {
      await step(tar.begin(FILES_PREFIX + f.path, f.size))
      for await (const chunk of createReadStream(store.blobs.path(f.sha256))) {
        await step(tar.data(chunk as Buffer))
        done += (chunk as Buffer).length
        options.onProgress?.({ phase: 'export', done, total, file: f.path })
      }
      await tar.end(f.size)
    }
    await step(tar.finish())
    gzip.end()
    await written
    publish(partial, target)
  } catch (err) {
    gzip.destroy()
    sink.destroy()
    await unlink(partial).catch(ignore('the partial file may not exist'))
    throw ioError(err, `writing ${target}`)
  }
  return { path: target, model }
}
