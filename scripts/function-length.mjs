// No function longer than a screen: 80 lines in framework/server/ and runners/ (the request path
// and the workers, where a newcomer reads first), 120 anywhere else in the product. A longer one
// is split into named steps that can be read and tested alone. Tests, benchmarks and examples are
// not checked (a describe() body is a list of cases, not a function to follow).
// Run by `npm run lint`; prints each function over its limit and exits 1.
import ts from 'typescript'
import { sourceFiles } from './source-files.mjs'

const SKIP = /^(test|bench|examples|docs|dist|node_modules)\//
const limitOf = (file) => (/^(framework\/server|runners)\//.test(file) ? 80 : 120)

const files = sourceFiles().filter(({ file }) => !SKIP.test(file))

/** A function's name as a reader finds it: its own, its variable's, or its property's. */
function nameOf(node) {
  if (node.name) return node.name.getText()
  const p = node.parent
  if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p)) return p.name.getText()
  return '(anonymous)'
}

const over = []
for (const { file, text } of files) {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const limit = limitOf(file)
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const first = src.getLineAndCharacterOfPosition(node.getStart()).line
      const last = src.getLineAndCharacterOfPosition(node.end).line
      const lines = last - first + 1
      if (lines > limit) over.push(`${file}:${first + 1}: ${nameOf(node)} is ${lines} lines (at most ${limit})`)
    }
    ts.forEachChild(node, visit)
  }
  visit(src)
}
if (over.length) {
  console.error(`${over.length} function(s) too long (split them into named steps):\n${over.join('\n')}`)
  process.exit(1)
}
console.log(`function length: ${files.length} files, none over its limit`)
