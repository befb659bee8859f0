import { createHash, timingSafeEqual } from 'node:crypto'
import { BundleError } from '../../errors/index.js'

// Which routes answer without the key is for the routes themselves to say: each part declares
// its routes open or keyed, and the app's key gate reads what it mounted (part.ts, RouteIndex).

const digest = (s: string): Buffer => createHash('sha256').update(s).digest()

/**
 * Checks a request's Authorization header against the key. Both sides are hashed first, so
 * the comparison is constant-time and its length says nothing about the key's.
 */
export function keyChecker(apiKey: string): (authorization: string | undefined) => void {
  const want = digest(apiKey)
  return (authorization) => {
    const m = /^Bearer\s+(.+)$/i.exec(authorization ?? '')
    if (!m || !timingSafeEqual(digest(m[1]!.trim()), want))
      throw new BundleError(
        'E_HTTP_UNAUTHORIZED',
        m ? 'the API key is not valid' : 'this server requires an API key: send Authorization: Bearer <key>',
      )
  }
}
