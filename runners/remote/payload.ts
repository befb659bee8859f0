import { deserialize, serialize } from 'node:v8'
import { BundleError } from '../../errors/index.js'

// A runner call as it travels in a BullMQ job: Node's structured serialization (typed arrays as
// raw bytes, never JSON number arrays), base64 so it fits BullMQ's JSON job data. API servers
// and workers of one bundle run the same Node version, which this format needs.

/** What a job carries: the call, and when its requests stop waiting (epoch ms). */
export interface JobData {
  method: string
  /** base64 of the serialized args. */
  args: string
  deadline: number
}

/** What a worker answers: the serialized result, or an error with its catalog code. */
export type JobResult = { ok: string } | { error: { code?: string; message: string }; stale?: boolean }

export const pack = (value: unknown): string => serialize(value).toString('base64')

export function unpack(text: string): unknown {
  try {
    return deserialize(Buffer.from(text, 'base64'))
  } catch (err) {
    throw new BundleError('E_INTERNAL', `a remote runner payload could not be read (API servers and workers must run the same Node.js version): ${(err as Error).message}`)
  }
}
