import { homedir } from 'node:os'
import { join, resolve } from 'node:path'

/** Where a store keeps things. Everything lives under one directory so a store can be moved or backed up whole. */
export interface StoreLayout {
  home: string
  index: string
  blobs: string
  tmp: string
  checkouts: string
}

export function defaultHome(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.BUNDLE_HOME
  return fromEnv !== undefined && fromEnv !== '' ? resolve(fromEnv) : join(homedir(), '.modelbundle')
}

export function layout(home: string): StoreLayout {
  const root = resolve(home)
  return {
    home: root,
    index: join(root, 'index.db'),
    blobs: join(root, 'blobs', 'sha256'),
    // Temp files live inside the store so the final rename never crosses file systems.
    tmp: join(root, 'tmp'),
    checkouts: join(root, 'checkouts'),
  }
}
