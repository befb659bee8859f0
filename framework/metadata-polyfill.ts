// Node 20 has no Symbol.metadata, so TC39 decorators would get no `context.metadata` object.
// Define it once, before any decorated class is evaluated; Symbol.for() makes every copy of
// this module (and the lowering helpers of tsc and esbuild) agree on the same symbol.
const s = Symbol as unknown as { metadata?: symbol }
s.metadata ??= Symbol.for('Symbol.metadata')
export {}
