import assert from 'node:assert/strict'
import { symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { tempDir } from '../utils/tmp.js'

// Issue 31: in a user's project, `client.direction({ bytes: readFileSync('x.png'), mediaType })`
// did not compile ('bytes' does not exist in type 'Image'): the client took each method's decoded
// input (pixels) instead of what goes over the wire. A user's project — its own directory, the
// README's tsconfig, `import … from 'modelbundle'` — calls every IO kind in its documented forms,
// and `@ts-expect-error` marks the wrong ones, so the check fails both when a documented form
// does not compile and when a wrong one does. `modelbundle` maps to this checkout's sources
// (test/builder/user-project.test.ts checks the packed package, at many times the cost).

const REPO = fileURLToPath(new URL('../..', import.meta.url))

const SERVICE = `import { api, io, service, type FileValue, type Image, type Tensor } from 'modelbundle'
import { z } from 'zod'

const Direction = z.object({ angle: z.number() })

@service({ name: 'mine' })
export class Mine {
  @api({ input: io.image(), output: io.json(Direction) })
  async direction(img: Image) { return { angle: img.width > 0 ? 0 : 180 } }

  @api({ input: io.image(), output: io.image() })
  async invert(img: Image): Promise<Image> { return img }

  @api({ input: io.file({ mediaTypes: ['audio/wav'] }), output: io.file() })
  async audio(f: FileValue): Promise<FileValue> { return f }

  @api({ input: io.bytes(), output: io.bytes() })
  async raw(b: Uint8Array) { return b }

  @api({ input: io.tensor({ dtype: 'float32', shape: [-1, 3] }), output: io.tensor({ dtype: 'float32' }) })
  async scores(t: Tensor<'float32'>): Promise<Tensor<'float32'>> { return t }

  @api({ input: io.tensor({ dtype: 'int64' }), output: io.tensor({ dtype: 'int64' }) })
  async ids(t: Tensor<'int64'>): Promise<Tensor<'int64'>> { return t }

  @api({ input: io.tensor({ dtype: 'string' }), output: io.json(z.number()) })
  async words(t: Tensor<'string'>) { return t.data.length }

  @api({ input: io.json(z.object({ name: z.string() })), output: io.json(z.object({ greeting: z.string() })) })
  async greet({ name }: { name: string }) { return { greeting: name } }

  @api({ input: io.text(), output: io.text() })
  async shout(s: string) { return s }

  @api({
    input: io.multipart({ image: io.image(), options: io.json(z.object({ lang: z.string() })) }),
    output: io.multipart({ page: io.image(), text: io.text() }),
  })
  async page(i: { image: Image; options: { lang: string } }) { return { page: i.image, text: i.options.lang } }

  @api({ input: io.stream(io.bytes()), output: io.stream(io.json(z.object({ n: z.number() }))) })
  async *listen(chunks: AsyncIterable<Uint8Array>) { for await (const c of chunks) yield { n: c.length } }
}
`

const CALLS = `import { readFileSync } from 'node:fs'
import { createClient, type FileValue } from 'modelbundle'
import type { Mine } from './service.js'

const client = createClient<typeof Mine>('http://localhost:3000')
const png = readFileSync('x.png')

// Images, files, audio and bytes: { bytes, mediaType }, bare bytes, a Blob or File.
const d: { angle: number } = await client.direction({ bytes: png, mediaType: 'image/png' })
await client.direction({ bytes: new Uint8Array(png) })
await client.direction(png)
await client.direction(new Blob([png], { type: 'image/png' }))
await client.audio(new File([png], 'a.wav', { type: 'audio/wav' }))
await client.audio({ bytes: png, mediaType: 'audio/wav', filename: 'a.wav' })
await client.raw(new Uint8Array([1, 2]))
// @ts-expect-error the decoded pixels are the server's business, not the client's
await client.direction({ width: 1, height: 1, channels: 3, data: new Uint8Array(3) })
// @ts-expect-error a path is not the image
await client.direction('x.png')
// @ts-expect-error bytes must be bytes
await client.audio({ bytes: 'RIFF', mediaType: 'audio/wav' })

// Binary answers: { bytes, mediaType, filename? }.
const inverted: FileValue = await client.invert(png)
const bytes: Uint8Array = inverted.bytes
const type: string = inverted.mediaType
// @ts-expect-error an image answer is PNG bytes, not pixels
inverted.width
const wav: FileValue = await client.audio(png)
const raw: Uint8Array = (await client.raw(png)).bytes

// Tensors: typed arrays (binary form) or JSON values, flat or nested; answers with typed arrays.
const s = await client.scores({ dtype: 'float32', shape: [1, 3], data: new Float32Array(3) })
const f32: Float32Array = s.data
const shape: number[] = s.shape
await client.scores({ shape: [1, 3], data: [0.1, 0.2, 0.7] })
await client.scores({ shape: [1, 3], data: [[0.1, 0.2, 0.7]] })
const i64: BigInt64Array = (await client.ids({ shape: [1], data: new BigInt64Array([2n ** 60n]) })).data
await client.words({ shape: [2], data: ['a', 'b'] })
// @ts-expect-error another dtype
await client.scores({ dtype: 'int32', shape: [1, 3], data: new Int32Array(3) })
// @ts-expect-error another dtype's typed array
await client.scores({ shape: [1, 3], data: new Float64Array(3) })
// @ts-expect-error strings in a float tensor
await client.scores({ shape: [1, 3], data: ['a', 'b', 'c'] })
// @ts-expect-error numbers in a string tensor
await client.words({ shape: [1], data: [1] })
// @ts-expect-error a tensor needs its shape
await client.scores({ data: new Float32Array(3) })

// JSON and text as the method takes them.
const g: string = (await client.greet({ name: 'ada' })).greeting
const t: string = await client.shout('hi')
// @ts-expect-error name is a string
await client.greet({ name: 1 })
// @ts-expect-error text is a string
await client.shout(42)

// Multipart: an object of parts in their wire forms; the answer likewise.
const p = await client.page({ image: { bytes: png, mediaType: 'image/png' }, options: { lang: 'en' } })
const pagePng: FileValue = p.page
const text: string = p.text
await client.page({ image: new Blob([png]), options: { lang: 'en' } })
// @ts-expect-error a part's pixels
await client.page({ image: { width: 1, height: 1, channels: 3, data: new Uint8Array(3) }, options: { lang: 'en' } })
// @ts-expect-error a JSON part keeps its schema
await client.page({ image: png, options: { lang: 1 } })

// A stream input is a WebSocket route, not a call.
// @ts-expect-error no such method on the client
client.listen

export { d, bytes, type, wav, raw, f32, shape, i64, g, t, pagePng, text }
`

/** The README's tsconfig for a service, as a user's project has it. */
function readmeOptions(): ts.CompilerOptions {
  const readme = ts.sys.readFile(join(REPO, 'README.md'))!
  const section = readme.slice(readme.indexOf('### From your own project'))
  const m = /```json\n([^`]+)```/.exec(section)
  assert.ok(m, 'the README shows a tsconfig.json')
  const { compilerOptions } = JSON.parse(m[1]!) as { compilerOptions: Record<string, unknown> }
  const { options, errors } = ts.convertCompilerOptionsFromJson(compilerOptions, REPO)
  assert.deepEqual(errors, [])
  return options
}

describe("typed client in a user's project", () => {
  it('compiles every IO kind in its documented forms, and refuses the wrong ones', () => {
    const dir = tempDir('mb-client-types-')
    // zod and @types/node as the project installs them; modelbundle from this checkout.
    symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'), 'dir')
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'mine', private: true, type: 'module' }))
    writeFileSync(join(dir, 'service.ts'), SERVICE)
    writeFileSync(join(dir, 'calls.ts'), CALLS)
    const files = [join(dir, 'service.ts'), join(dir, 'calls.ts')]
    const options = { ...readmeOptions(), paths: { modelbundle: [join(REPO, 'framework/index.ts')] } }
    const program = ts.createProgram(files, options)
    // The user's files only: the framework's own sources are type-checked by npm run typecheck.
    const diagnostics = [
      ...program.getOptionsDiagnostics(),
      ...program.getGlobalDiagnostics(),
      ...files.flatMap((f) => {
        const source = program.getSourceFile(f)
        assert.ok(source, `${f} is in the program`)
        return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]
      }),
    ]
    const text = ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => dir,
      getNewLine: () => '\n',
    })
    assert.equal(text, '', 'tsc reports nothing on the user project')
    // And modelbundle was this checkout, not a stale build: the mapping was used.
    assert.ok(program.getSourceFile(join(REPO, 'framework/client/create-client.ts')))
  })
})
