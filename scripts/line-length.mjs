// Fails when a source line is longer than 120 characters. The formatter keeps code within that
// width but cannot break a long string or comment; this names each one left, file:line.
// Data (JSON, YAML, Markdown, fixtures that are not code) is not checked.
import { sourceFiles } from './source-files.mjs'

const MAX = 120
const files = sourceFiles()

const long = []
for (const { file, text } of files) {
  for (const [i, line] of text.split('\n').entries()) {
    if (line.length > MAX) long.push(`${file}:${i + 1}: ${line.length} characters`)
  }
}
if (long.length > 0) {
  console.error(`${long.length} line(s) over ${MAX} characters (split the string or comment):\n${long.join('\n')}`)
  process.exit(1)
}
console.log(`line length: ${files.length} files, none over ${MAX} characters`)
