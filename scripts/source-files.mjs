// The repository's TypeScript and JavaScript sources as git sees them (tracked and new files, not
// ignored ones; no .d.ts), with their text: what the lint scripts read.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

export function sourceFiles() {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts', '*.mjs'], {
    encoding: 'utf8',
  })
    .split('\n')
    .filter((f) => f !== '' && !f.endsWith('.d.ts'))
    .flatMap((file) => {
      try {
        return [{ file, text: readFileSync(file, 'utf8') }]
      } catch {
        return [] // listed by git but deleted in the working tree
      }
    })
}
