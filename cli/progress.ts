import type { ProgressFn } from '../store/index.js'
import { humanSize } from './output.js'

const WIDTH = 28
const INTERVAL_MS = 100

/**
 * A one-line progress bar on stderr, only when stderr is a terminal: scripts and CI logs get
 * no carriage-return noise. Returns `done` to clear the line.
 */
export function progressBar(
  label: string,
  stream: NodeJS.WriteStream = process.stderr,
): { onProgress?: ProgressFn; done: () => void } {
  if (!stream.isTTY) return { done: () => undefined }
  let last = 0
  let drawn = false
  const onProgress: ProgressFn = ({ done, total }) => {
    const now = Date.now()
    if (now - last < INTERVAL_MS && done < total) return
    last = now
    const ratio = total > 0 ? Math.min(1, done / total) : 1
    const filled = Math.round(ratio * WIDTH)
    stream.write(
      `\r${label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ` +
        `${String(Math.round(ratio * 100)).padStart(3)}% ${humanSize(done)}/${humanSize(total)}\x1b[K`,
    )
    drawn = true
  }
  return {
    onProgress,
    done: () => {
      if (drawn) stream.write('\r\x1b[K')
    },
  }
}
