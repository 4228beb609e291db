// Commands outlive a restart of `sandlot serve` (run by
// TestCommandsSurviveRestart, in two phases around the restart).
// before: create a sandbox, set a python variable, start two background
// commands, print {sandboxId, ticker, sleeper} as JSON.
// after: connect again; both commands are listed; connect(pid) streams the
// ticker's output to its end (exit code 0, the ticks printed while the
// daemon was down included); kill(pid) ends the sleeper; the variable is
// still there.
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

const phase = process.argv[2]
if (phase === 'before') {
  const sbx = await Sandbox.create({ timeoutMs: 300_000 })
  await sbx.runCode('kept = 6 * 7')
  const ticker = await sbx.commands.run('for i in $(seq 1 12); do echo tick-$i; sleep 1; done; echo ticker-done', { background: true, timeoutMs: 0 })
  const sleeper = await sbx.commands.run('echo sleeping; sleep 600', { background: true, timeoutMs: 0 })
  await ticker.disconnect()
  await sleeper.disconnect()
  console.log(JSON.stringify({ sandboxId: sbx.sandboxId, ticker: ticker.pid, sleeper: sleeper.pid }))
} else if (phase === 'after') {
  const { sandboxId, ticker, sleeper } = JSON.parse(process.argv[3])
  const sbx = await Sandbox.connect(sandboxId)
  const pids = (await sbx.commands.list()).map((p) => p.pid)
  assert.ok(pids.includes(ticker) && pids.includes(sleeper), `listed ${pids}; want ${ticker} and ${sleeper}`)
  const seen = []
  const h = await sbx.commands.connect(ticker, { onStdout: (d) => seen.push(d) })
  const res = await h.wait()
  assert.equal(res.exitCode, 0)
  const out = res.stdout + seen.join('')
  assert.match(out, /ticker-done/)
  assert.match(out, /tick-12/)
  const slept = await sbx.commands.connect(sleeper)
  assert.equal(await sbx.commands.kill(sleeper), true)
  await assert.rejects(slept.wait(), (e) => e.name === 'CommandExitError')
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === sleeper), 'the sleeper survived kill')
  await assert.rejects(sbx.commands.connect(999_999), /not found/)
  assert.equal((await sbx.runCode('kept')).text, '42')
  await sbx.kill()
  console.log('after: ok')
} else {
  throw new Error(`phase ${phase}: before or after`)
}
