import { api, io, onShutdown, onStartup, service } from 'modelbundle'
import { z } from 'zod'

const GreetIn = z.object({ name: z.string().min(1).max(100) })
const GreetOut = z.object({ greeting: z.string() })

@service({ name: 'greeter', traffic: { timeoutMs: 30_000, maxConcurrency: 64 } })
export class Greeter {
  private punctuation = '?'

  @onStartup
  async load() {
    // Where a real service loads resources or warms up; /readyz stays 503 until this returns.
    this.punctuation = '!'
  }

  @api({ input: io.json(GreetIn), output: io.json(GreetOut) })
  async greet({ name }: { name: string }) {
    return { greeting: `hello ${name}${this.punctuation}` }
  }

  @api({ input: io.text(), output: io.text(), route: '/shout' })
  async shout(text: string) {
    return text.toUpperCase()
  }

  @onShutdown
  async close() {
    this.punctuation = '.'
  }
}
