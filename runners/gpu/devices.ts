import { execFileSync } from 'node:child_process'

/**
 * The GPUs this machine has, as CUDA device ids. BUNDLE_GPU_DEVICES overrides discovery
 * ("0,1,2,3"; empty = none): that is how placement is tested without a GPU, and how an
 * operator reserves devices. Otherwise `nvidia-smi -L`; no nvidia-smi means no GPUs.
 */
export function gpuDevices(
  env: NodeJS.ProcessEnv = process.env,
  run: () => string = () =>
    execFileSync('nvidia-smi', ['-L'], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] }),
): string[] {
  const override = env.BUNDLE_GPU_DEVICES
  if (override !== undefined)
    return override
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')
  try {
    return parseNvidiaSmi(run())
  } catch {
    return []
  }
}

/** `GPU 0: NVIDIA H200 (UUID: GPU-…)` lines → ['0', …]. */
export function parseNvidiaSmi(text: string): string[] {
  return [...text.matchAll(/^GPU (\d+):/gm)].map((m) => m[1]!)
}
