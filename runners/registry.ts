import { BundleError } from '../errors/index.js'

/**
 * Every runner this process created, so that a server can tell which were never declared in
 * its service's `runners` (a runner the server does not know is never started, and every call
 * to it would fail). Weak: runners a test or a module drops are not kept alive by this.
 */
// Process-wide, not module-wide: a service can import another copy of this module (the compiled
// one, while the server runs from sources in tests), and the server must still see the runners it made.
const KEY = Symbol.for('modelbundle.createdRunners')
type Created = Set<WeakRef<{ readonly name: string }>>
const slot = globalThis as { [KEY]?: Created }
const created: Created = (slot[KEY] ??= new Set())

export function trackRunner(runner: { readonly name: string }): void {
  created.add(new WeakRef(runner))
}

/** Runners created in this process that are not in `declared`. */
export function undeclaredRunners(declared: readonly object[]): { readonly name: string }[] {
  const out: { readonly name: string }[] = []
  for (const ref of created) {
    const r = ref.deref()
    if (r === undefined) created.delete(ref)
    else if (!declared.includes(r)) out.push(r)
  }
  return out
}

/**
 * The error for a call to a runner without workers: never started means the service does not
 * declare it (the server starts exactly the declared runners); started once means it stopped.
 */
export function notRunning(name: string, everStarted: boolean): BundleError {
  if (everStarted) return new BundleError('E_RUNNER_STOPPED', `runner ${name} is not started`)
  return new BundleError(
    'E_RUNNER_NOT_DECLARED',
    `runner ${name} was called but never started: the server starts only the runners a service declares; add it to ` +
      `@service({ runners: [...] }) (or defineService({ runners }))`,
  )
}
