import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { describe, it } from 'node:test'
import { vendorDependencies } from '../../builder/vendor.js'
import { snapshot, tempDir } from '../utils/tmp.js'

// What `bundle containerize` copies into an image's node_modules, on a small installed tree
// written here: the kinds of files the real dependencies ship (a node-gyp addon with its build
// tree, onnxruntime-style binaries for every platform, docs, maps, declarations, tests).

function put(root: string, files: Record<string, string | object>): void {
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true })
    writeFileSync(join(root, rel), typeof content === 'string' ? content : JSON.stringify(content))
  }
}

function installed(): string {
  const from = tempDir()
  const pkg = (name: string, extra: object = {}) => ({ name, version: '1.0.0', ...extra })
  put(from, {
    'package.json': { name: 'project', private: true },
    // The framework: depends on what it needs to serve and on its build tools.
    'node_modules/fw/package.json': pkg('fw', {
      main: 'dist/index.js',
      dependencies: { native: '1', ort: '1', odd: '1', esbuild: '1', tsx: '1' },
    }),
    'node_modules/fw/dist/index.js': 'export {}',
    'node_modules/fw/dist/index.js.map': '{}',
    'node_modules/fw/dist/index.d.ts': 'export {}',
    'node_modules/fw/README.md': '# fw',
    // Script-tag builds beside the module one: Node never loads them.
    'node_modules/fw/build/amd/fw.js': '',
    'node_modules/fw/build/global/fw.js': '',
    'node_modules/fw/dist/umd/fw.js': '',
    'node_modules/esbuild/package.json': pkg('esbuild', {
      main: 'lib/main.js',
      optionalDependencies: { '@esbuild/linux-x64': '1' },
    }),
    'node_modules/esbuild/lib/main.js': '',
    'node_modules/@esbuild/linux-x64/package.json': pkg('@esbuild/linux-x64'),
    'node_modules/@esbuild/linux-x64/bin/esbuild': '',
    'node_modules/tsx/package.json': pkg('tsx', { dependencies: { esbuild: '1', 'get-tsconfig': '1' } }),
    'node_modules/tsx/dist/cli.mjs': '',
    'node_modules/get-tsconfig/package.json': pkg('get-tsconfig'),
    'node_modules/get-tsconfig/dist/index.cjs': '',
    // A node-gyp addon, as better-sqlite3 installs: sources, build tree, one compiled .node.
    'node_modules/native/package.json': pkg('native', { main: 'lib/index.js' }),
    'node_modules/native/binding.gyp': '{}',
    'node_modules/native/LICENSE.md': 'MIT',
    'node_modules/native/README.md': '# native',
    'node_modules/native/lib/index.js': '',
    'node_modules/native/lib/methods/run.js': '',
    'node_modules/native/deps/sqlite3/sqlite3.c': 'int x;',
    'node_modules/native/deps/sqlite3.gyp': '{}',
    'node_modules/native/deps/copy.js': '',
    'node_modules/native/src/addon.cpp': '',
    'node_modules/native/build/Makefile': '',
    'node_modules/native/build/config.gypi': '',
    'node_modules/native/build/Release/addon.node': 'ELF',
    'node_modules/native/build/Release/addon.a': '',
    'node_modules/native/build/Release/obj.target/addon.node': 'ELF',
    'node_modules/native/build/Release/obj/gen/sqlite3.o': '',
    // onnxruntime-node: prebuilt binaries for every OS and CPU.
    'node_modules/ort/package.json': pkg('ort', {
      exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
    }),
    'node_modules/ort/dist/index.js': '',
    'node_modules/ort/dist/index.d.ts': '',
    'node_modules/ort/lib/index.ts': 'export const x: number = 1',
    'node_modules/ort/bin/napi-v6/darwin/arm64/binding.node': '',
    'node_modules/ort/bin/napi-v6/darwin/arm64/libonnxruntime.dylib': '',
    'node_modules/ort/bin/napi-v6/win32/x64/binding.node': '',
    'node_modules/ort/bin/napi-v6/win32/x64/onnxruntime.dll': '',
    'node_modules/ort/bin/napi-v6/linux/arm64/binding.node': '',
    'node_modules/ort/bin/napi-v6/linux/x64/binding.node': '',
    'node_modules/ort/bin/napi-v6/linux/x64/libonnxruntime.so.1': '',
    // Its entry point inside a folder named test: entry points always stay.
    'node_modules/odd/package.json': pkg('odd', { main: 'test/index.js' }),
    'node_modules/odd/test/index.js': '',
    'node_modules/odd/tests/spec.js': '',
    'node_modules/odd/prebuilds/linux-x64/odd.node': '',
    'node_modules/odd/prebuilds/darwin-x64+arm64/odd.node': '',
    'node_modules/odd/prebuilds/win32-x64/odd.node': '',
  })
  return from
}

const PINNED = ['fw', 'native', 'ort', 'odd', 'esbuild', '@esbuild/linux-x64', 'tsx', 'get-tsconfig'].map(
  (n) => `${n}@1.0.0`,
)

describe('vendorDependencies (what goes into an image)', () => {
  it(
    'copies only what runs on linux/x64: no build tools, native build tree, other platforms, docs, maps or ' +
      'declarations',
    () => {
      const from = installed()
      const dest = tempDir()
      const stats = vendorDependencies({ fw: '1.0.0' }, PINNED, from, dest, { arch: 'x64' })
      assert.deepEqual(Object.keys(snapshot(join(dest, 'node_modules'))).sort(), [
        'fw/dist/index.js',
        'fw/package.json',
        'native/LICENSE.md',
        'native/binding.gyp',
        'native/build/Release/addon.node',
        'native/lib/index.js',
        'native/lib/methods/run.js',
        'native/package.json',
        'odd/package.json',
        'odd/prebuilds/linux-x64/odd.node',
        'odd/test/index.js',
        'ort/bin/napi-v6/linux/x64/binding.node',
        'ort/bin/napi-v6/linux/x64/libonnxruntime.so.1',
        'ort/dist/index.js',
        'ort/package.json',
      ])
      assert.deepEqual(stats.leftOutPackages.sort(), [
        '@esbuild/linux-x64@1.0.0',
        'esbuild@1.0.0',
        'get-tsconfig@1.0.0',
        'tsx@1.0.0',
      ])
      assert.equal(stats.packages, 4)
      assert.equal(stats.files, 15)
      assert.deepEqual(Object.keys(stats.pruned).sort(), [
        'TypeScript sources',
        'browser script builds',
        'docs',
        'native build tree',
        'other platforms',
        'source maps',
        'tests',
        'type declarations',
      ])
      assert.equal(stats.pruned['other platforms']!.files, 7)
    },
  )

  it('keeps the image architecture’s binaries (arm64)', () => {
    const dest = tempDir()
    vendorDependencies({ fw: '1.0.0' }, PINNED, installed(), dest, { arch: 'arm64' })
    const files = Object.keys(snapshot(join(dest, 'node_modules')))
    assert.deepEqual(files.filter((f) => f.includes('/bin/') || f.includes('prebuilds')).sort(), [
      'ort/bin/napi-v6/linux/arm64/binding.node',
    ])
  })

  it(
    'keeps tsx, esbuild and TypeScript files when the bundle ' + 'carries TypeScript modules, or imports them itself',
    () => {
      for (const [direct, o] of [
        [{ fw: '1.0.0' }, { typescript: true }],
        [{ fw: '1.0.0', tsx: '1.0.0' }, {}],
      ] as const) {
        const dest = tempDir()
        const stats = vendorDependencies(direct, PINNED, installed(), dest, { arch: 'x64', ...o })
        const files = Object.keys(snapshot(join(dest, 'node_modules')))
        for (const f of [
          'tsx/dist/cli.mjs',
          'esbuild/lib/main.js',
          '@esbuild/linux-x64/bin/esbuild',
          'get-tsconfig/dist/index.cjs',
          'ort/lib/index.ts',
        ])
          assert.ok(files.includes(f), `${f} with ${JSON.stringify(direct)} ${JSON.stringify(o)}`)
        assert.deepEqual(stats.leftOutPackages, [])
      }
    },
  )
})
