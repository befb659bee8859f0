/**
 * Launched through npm (`npx bundle serve`, an npm script), the server's parent is a shell that
 * npm started: on SIGTERM npm signals that shell, the shell dies without passing the signal on,
 * and the server would go on serving, orphaned, under a process manager that believes it
 * stopped. So under npm the process watches its parent, and when the parent is gone it shuts
 * down exactly as on SIGTERM (drain, hooks, exit 0). Outside npm nothing changes: a server
 * started with `nohup … &` from a terminal keeps running after the terminal closes.
 */
export function followParentUnderNpm(intervalMs = 500): void {
  if (process.env.npm_lifecycle_event === undefined) return
  const parent = process.ppid
  // PID 1 (a container's init, systemd) never goes away from under us.
  if (parent <= 1) return
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    process.kill(process.pid, 'SIGTERM')
  }, intervalMs)
  timer.unref()
}
