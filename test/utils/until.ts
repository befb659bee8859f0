/**
 * Polls `ok()` every 50 ms until it holds, failing with `what` after `ms`: tests wait for what they
 * assert, not for a guessed time, and the generous default leaves room for a busy machine.
 */
export async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
