import { get } from 'node:http'

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`
const SAMPLE = new RegExp(`^(${NAME})(\\{(?:${LABEL})(?:,${LABEL})*,?\\}|\\{\\})?\\s+(\\S+)(?:\\s+-?\\d+)?$`)
const HELP = new RegExp(`^# HELP ${NAME} .*$`)
const TYPE = new RegExp(`^# TYPE ${NAME} (counter|gauge|histogram|summary|untyped)$`)

/** Parses the Prometheus text exposition format strictly; throws on the first bad line. */
export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = []
  for (const [i, line] of text.split('\n').entries()) {
    if (line === '') continue
    if (line.startsWith('#')) {
      if (line.startsWith('# HELP ') ? !HELP.test(line) : line.startsWith('# TYPE ') ? !TYPE.test(line) : false)
        throw new Error(`line ${i + 1}: bad comment: ${line}`)
      continue
    }
    const m = SAMPLE.exec(line)
    if (!m) throw new Error(`line ${i + 1}: not a sample: ${line}`)
    // Values are read like Go's strconv.ParseFloat, as Prometheus does: NaN/Inf in any case
    // (prom-client's event-loop gauges print "Nan" before their first sample).
    const raw = m[3]!
    const value = /^[+]?inf$/i.test(raw)
      ? Infinity
      : /^-inf$/i.test(raw)
        ? -Infinity
        : /^nan$/i.test(raw)
          ? NaN
          : Number(raw)
    if (Number.isNaN(value) && !/^nan$/i.test(raw)) throw new Error(`line ${i + 1}: bad value ${raw}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!
    out.push({ name: m[1]!, labels, value })
  }
  return out
}

/**
 * The requests to `endpoint` the server at `url` is handling now (bundle_request_in_progress) and has answered
 * (bundle_request_total), read on a connection of its own so that no idle keep-alive connection is left behind.
 */
export function requestCounts(url: string, endpoint: string): Promise<{ inProgress: number; answered: number }> {
  return new Promise((resolve, reject) => {
    get(`${url}/metrics`, { agent: false }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (text += c))
      res.on('end', () => {
        try {
          const sum = (name: string) =>
            parsePrometheus(text)
              .filter((x) => x.name === name && x.labels.endpoint === endpoint)
              .reduce((n, x) => n + x.value, 0)
          resolve({ inProgress: sum('bundle_request_in_progress'), answered: sum('bundle_request_total') })
        } catch (err) {
          reject(err)
        }
      })
    }).on('error', reject)
  })
}
