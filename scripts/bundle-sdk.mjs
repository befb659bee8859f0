// After tsc: replaces dist/runners/tracing/sdk.js with that module and the OpenTelemetry SDK
// packages it imports bundled into one file. The packages are devDependencies: as installed
// they are ~9 MB (most of it semantic-convention tables never read), bundled ~0.7 MB, so images
// stay small and only @opentelemetry/api (shared with a service's own instrumentation) is a
// dependency. The file is loaded only when tracing is on.
import { rm } from 'node:fs/promises'
import { build } from 'esbuild'

await build({
  entryPoints: ['runners/tracing/sdk.ts'],
  outfile: 'dist/runners/tracing/sdk.js',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['@opentelemetry/api'],
  // The SDK's CommonJS modules require node's built-ins (http, zlib …): give the ESM bundle a require.
  banner: {
    js:
      "import { createRequire as __bundleRequire } from 'node:module'; " +
      'const require = __bundleRequire(import.meta.url);',
  },
  legalComments: 'eof',
  logLevel: 'warning',
})
// tsc's source map described its own output of the file, not this bundle.
await rm('dist/runners/tracing/sdk.js.map', { force: true })
