/**
 * The rejection handler for a promise whose failure nobody can act on, with the reason said where
 * it is used: `.catch(ignore('the payload expires by its TTL anyway'))`. Nothing is lost silently:
 * with BUNDLE_DEBUG=1 each ignored failure is written to stderr with its reason, which is how to
 * find what a quiet failure was.
 */
export function ignore(why: string): (err: unknown) => undefined {
  return (err) => {
    if (process.env.BUNDLE_DEBUG === '1') {
      const message = err instanceof Error ? err.message : String(err)
      process.stderr.write(`modelbundle: ignored a failure (${why}): ${message}\n`)
    }
    return undefined
  }
}
