import { runLoad } from './load.js'
const r = await runLoad({ url: `http://127.0.0.1:${process.argv[2]}/greet`, headers: { 'content-type': 'application/json' }, body: '{"name":"ada"}', concurrency: 16, warmupMs: 500, durationMs: 4000 })
console.log(Math.round(r.rps), r.p99.toFixed(2), r.requests)
