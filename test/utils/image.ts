import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const sh = promisify(execFile)

// Looks inside a built image with the image's own node: every file under /app/node_modules with
// its size. Nothing is copied out; the image's entrypoint is bypassed.
const LIST =
  `const fs=require('fs'),p=require('path'),out={};const walk=(d)=>{for(const e of ` +
  `fs.readdirSync(d,{withFileTypes:true})){const f=p.join(d,e.name);if(e.isDirectory())walk(f);else ` +
  `out[p.relative('/app/node_modules',f)]=fs.statSync(f).size}};wal` +
  `k('/app/node_modules');process.stdout.write(JSON.stringify(out))`

/** Files under the image's /app/node_modules (relative path → bytes). */
export async function nodeModulesOf(engine: string, image: string): Promise<Record<string, number>> {
  const { stdout } = await sh(engine, ['run', '--rm', '--no-healthcheck', '--entrypoint', 'node', image, '-e', LIST], {
    maxBuffer: 256 << 20,
  })
  return JSON.parse(stdout) as Record<string, number>
}

/** The package a node_modules path belongs to (`a`, `@s/b`, `a/node_modules/c`). */
export function packageOfPath(rel: string): string {
  const parts = rel.split('/')
  const out: string[] = []
  let i = 0
  for (;;) {
    const n = parts[i]!.startsWith('@') ? 2 : 1
    out.push(parts.slice(i, i + n).join('/'))
    i += n
    if (parts[i] !== 'node_modules' || i + 1 >= parts.length - 1) break
    out.push('node_modules')
    i++
  }
  return out.join('/')
}

/** Bytes by package, largest first. */
export function bytesByPackage(files: Record<string, number>): [string, number][] {
  const by = new Map<string, number>()
  for (const [rel, size] of Object.entries(files)) by.set(packageOfPath(rel), (by.get(packageOfPath(rel)) ?? 0) + size)
  return [...by].sort((a, b) => b[1] - a[1])
}

/** An image's size as the engine reports it (bytes, uncompressed layers). */
export async function imageBytes(engine: string, image: string): Promise<number> {
  return Number((await sh(engine, ['image', 'inspect', '--format', '{{.Size}}', image])).stdout.trim())
}
