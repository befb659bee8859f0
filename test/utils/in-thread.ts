import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'

/**
 * Calls `name(...args)`, exported by the TypeScript module `file`, in a worker thread, and resolves
 * with what it answers (a structured clone). For long simulations on fake time: node:test tracks
 * every async resource a test creates with an async hook (a destroy hook for every promise), which
 * made them 2.5× slower than the same code outside the runner; a thread has hooks of its own, none.
 */
export function inThread<T>(file: string, name: string, args: unknown[] = []): Promise<T> {
  // Threads take no --import: the module loads through tsx's API, resolved from here.
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))})
      .then(({ tsImport }) => tsImport(workerData.url, workerData.url))
      .then((mod) => mod[workerData.name](...workerData.args))
      .then(
        (value) => parentPort.postMessage({ value }),
        (err) => parentPort.postMessage({ err: String(err?.stack ?? err) }),
      )`
  const worker = new Worker(source, {
    eval: true,
    execArgv: [],
    workerData: { url: pathToFileURL(file).href, name, args },
  })
  return new Promise<T>((resolve, reject) => {
    worker.once('message', (m: { value?: T; err?: string }) => {
      void worker.terminate()
      if (m.err !== undefined) reject(new Error(`in a thread: ${m.err}`))
      else resolve(m.value as T)
    })
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the thread exited (${code}) before answering`)))
  })
}
