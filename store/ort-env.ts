/**
 * Sets up this process's environment for onnxruntime before it first loads: its telemetry off
 * unless the operator set ORT_DISABLE_TELEMETRY themselves (a server sends nothing anywhere it
 * was not told to, and a container without a CA bundle logs no warning about it). onnxruntime
 * reads the variable from the process environment once, when its first session is created: a
 * worker thread's copy of process.env does not reach it, so the process that starts the threads
 * calls this too.
 */
export function quietOnnxRuntime(env: NodeJS.ProcessEnv = process.env): void {
  env.ORT_DISABLE_TELEMETRY ??= '1'
}
