import { createInterface } from 'node:readline/promises'
import { BundleError } from '../errors/index.js'

/** Asks y/N on a terminal; without one, destructive commands need --yes. */
export async function confirm(question: string, yes: boolean): Promise<boolean> {
  if (yes) return true
  if (!process.stdin.isTTY)
    throw new BundleError(
      'E_CLI_CONFIRM_REQUIRED',
      `${question.replace(/\?$/, '')}: no terminal to confirm on; pass -y to confirm`,
    )
  const rl = createInterface({ input: process.stdin, output: process.stderr })
  try {
    const answer = await rl.question(`${question} [y/N] `)
    return /^y(es)?$/i.test(answer.trim())
  } finally {
    rl.close()
  }
}
