// Commands outlive a restart of `sandlot serve` (run by
// TestCommandsSurviveRestart, in two phases around the restart).
// before: create a sandbox, set a python variable, start two background
// commands, print {sandboxId, ticker, sleeper} as JSON.
// after: connect again; both commands are listed; connect(pid) streams the
// ticker's output to its end (exit code 0, the ticks printed while the
// daemon was down included); connect(pid) of a command that ended while no
// daemon was attached to it gets what it printed then and its exit code; kill(pid) ends the
// sleeper; the variable is still there.
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

const phase = process.argv[2]
if (phase === 'before') {
  const sbx = await Sandbox.create({ timeoutMs: 300_000 })
  await sbx.runCode('kept = 6 * 7')
  const ticker = await sbx.commands.run('for i in $(seq 1 12); do echo tick-$i; sleep 1; done; echo ticker-done', { background: true, timeoutMs: 0 })
  const sleeper = await sbx.commands.run('echo sleeping; sleep 600', { background: true, timeoutMs: 0 })
  const quick = await sbx.commands.run("trap 'echo quick-done; exit 3' TERM; echo quick-start; sleep 600 >/dev/null 2>&1 & wait", { background: true, timeoutMs: 0 })
  await ticker.disconnect()
  await sleeper.disconnect()
  await quick.disconnect()
  console.log(JSON.stringify({ sandboxId: sbx.sandboxId, ticker: ticker.pid, sleeper: sleeper.pid, quick: quick.pid }))
} else if (phase === 'after') {
  const { sandboxId, ticker, sleeper, quick } = JSON.parse(process.argv[3])
  const sbx = await Sandbox.connect(sandboxId)
  // It ends while this daemon is not attached to it (a command of its own
  // signals it), printing on its way out; connect then replays what it
  // printed while detached, and its exit code.
  await sbx.commands.run(`kill -TERM ${quick}; while kill -0 ${quick} 2>/dev/null; do sleep 0.1; done`, { timeoutMs: 60_000 })
  const ended = []
  const q = await sbx.commands.connect(quick, { onStdout: (d) => ended.push(d) })
  // (quick-start went to the daemon before the restart, which streamed it)
  await assert.rejects(q.wait(), (e) => e.name === 'CommandExitError' && e.exitCode === 3 &&
    /quick-done/.test(ended.join('') + e.stdout))
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
