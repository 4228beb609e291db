// The E2B SDK figures of `sandlot bench` (bench/e2bsdk.go): the official
// E2B JavaScript SDK, found in E2B_BENCH_SDK_DIR's node_modules, creates
// sandboxes on sandlot's E2B surface (E2B_API_URL, E2B_SANDBOX_URL,
// E2B_API_KEY) and runs `echo` in each. It prints one JSON object:
// {"series": {NAME: [milliseconds, ...]}, "parts": {NAME:create: [...],
// NAME:echo: [...]}}, each sample a Sandbox.create() and its first
// commands.run('echo ok') (parts: each half), the kills not timed.
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

const require = createRequire(process.env.E2B_BENCH_SDK_DIR + '/')
const { Sandbox } = require('e2b')

const num = (name, def) => {
  const v = Number(process.env[name] ?? def)
  return Number.isInteger(v) && v >= 0 ? v : def
}
const serial = num('E2B_BENCH_SERIAL', 30)
const burst = num('E2B_BENCH_BURST', 0)
const conc = num('E2B_BENCH_CONCURRENT', 0)
const rounds = num('E2B_BENCH_ROUNDS', 3)
const pause = num('E2B_BENCH_PAUSE_MS', 0)

const live = []

// The two halves of every counted sample, by series.
const parts = {}

// one creates a sandbox and runs echo in it, and returns the time taken;
// its halves go to parts[name].
async function one (name) {
  const t0 = performance.now()
  const sbx = await Sandbox.create({ timeoutMs: 300_000 })
  const t1 = performance.now()
  live.push(sbx.sandboxId)
  const r = await sbx.commands.run('echo ok')
  const t2 = performance.now()
  if (r.stdout.trim() !== 'ok') throw new Error(`echo gave ${JSON.stringify(r.stdout)}`)
  if (name) {
    parts[name + ':create'] ??= []
    parts[name + ':echo'] ??= []
    parts[name + ':at'] ??= []
    parts[name + ':create'].push(t1 - t0)
    parts[name + ':echo'].push(t2 - t1)
    parts[name + ':at'].push(performance.timeOrigin + t0)
  }
  return t2 - t0
}

async function killAll () {
  const ids = live.splice(0)
  for (let i = 0; i < ids.length; i += 8) {
    await Promise.all(ids.slice(i, i + 8).map((id) => Sandbox.kill(id).catch(() => {})))
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const series = {}
try {
  // One not counted: the SDK's first connection and the daemon's first
  // E2B create.
  await one()
  await killAll()

  // In a row: each sandbox is killed before the next create, then a pause
  // (a user's pace, the pool's time to refill).
  series.serial = []
  for (let i = 0; i < serial; i++) {
    series.serial.push(await one('serial'))
    await killAll()
    if (pause > 0) await sleep(pause)
  }
  // A burst: creates back to back, every sandbox kept until the end.
  if (burst > 0) {
    series.burst = []
    for (let i = 0; i < burst; i++) series.burst.push(await one('burst'))
    await killAll()
    if (pause > 0) await sleep(pause)
  }
  // Concurrent: rounds of conc creates at once.
  if (conc > 0) {
    series.concurrent = []
    for (let r = 0; r < rounds; r++) {
      series.concurrent.push(...await Promise.all(Array.from({ length: conc }, () => one('concurrent'))))
      await killAll()
      if (pause > 0) await sleep(pause)
    }
  }
} finally {
  await killAll()
}
process.stdout.write(JSON.stringify({ series, parts }) + '\n')
