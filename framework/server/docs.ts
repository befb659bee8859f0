import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

// Swagger UI comes from the swagger-ui-dist package on disk: no CDN, works offline.
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}

let root: string | undefined
const distRoot = (): string =>
  (root ??= (createRequire(import.meta.url)('swagger-ui-dist') as { getAbsoluteFSPath(): string }).getAbsoluteFSPath())

const cache = new Map<string, Uint8Array>()

export function docsAsset(name: string): { body: Uint8Array; contentType: string } | undefined {
  const contentType = ASSETS[name]
  if (contentType === undefined) return undefined
  let body = cache.get(name)
  if (body === undefined) cache.set(name, (body = new Uint8Array(readFileSync(join(distRoot(), name)))))
  return { body, contentType }
}

// validatorUrl: null — Swagger UI's default badge is an <img> from validator.swagger.io that
// sends it the spec's URL; on any host but localhost it would make /docs call out.
export function docsPage(title: string): string {
  const safe = title.replace(/[<>&"]/g, '')
  return (
    `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${safe} — API docs</title>
<link rel="icon" href="/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', ` +
    `presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], ` +
    `layout: 'StandaloneLayout', validatorUrl: null })
</script>
</body>
</html>
`
  )
}
