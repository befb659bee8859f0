// Fails when a source line is longer than 120 characters. The formatter keeps code within that
// width but cannot break a long string or comment; this names each one left, file:line.
// Data (JSON, YAML, Markdown, fixtures that are not code) is not checked.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

const MAX = 120
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts', '*.mjs'], {
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => f !== '' && !f.endsWith('.d.ts'))

const long = []
for (const file of files) {
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    continue // listed by git but deleted in the working tree
  }
  for (const [i, line] of text.split('\n').entries()) {
    if (line.length > MAX) long.push(`${file}:${i + 1}: ${line.length} characters`)
  }
}
if (long.length > 0) {
  console.error(`${long.length} line(s) over ${MAX} characters (split the string or comment):\n${long.join('\n')}`)
  process.exit(1)
}
console.log(`line length: ${files.length} files, none over ${MAX} characters`)
