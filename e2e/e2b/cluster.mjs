// The official E2B JS SDK against sandlot on Kubernetes (run by e2e/k8s
// TestSandlotOnCluster through the Service, with E2B_API_URL and
// E2B_SANDBOX_URL naming it): create, runCode with state kept between
// calls, files written and read, a command, kill. Prints the sandbox's id
// and "cluster: ok".
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

const sbx = await Sandbox.create({ timeoutMs: 300_000 })
console.log(`sandbox ${sbx.sandboxId}`)
await sbx.runCode('kept = 6 * 7')
assert.equal((await sbx.runCode('kept')).text, '42')
await sbx.files.write('/home/user/e2b.txt', 'written by the SDK')
assert.equal(await sbx.files.read('/home/user/e2b.txt'), 'written by the SDK')
const res = await sbx.commands.run('cat /home/user/e2b.txt; echo; echo exit-$((6*7))')
assert.equal(res.exitCode, 0)
assert.match(res.stdout, /written by the SDK/)
assert.match(res.stdout, /exit-42/)
assert.equal((await sbx.runCode('kept + 1')).text, '43')
assert.equal(await sbx.kill(), true)
assert.equal(await Sandbox.kill(sbx.sandboxId), false)
console.log('cluster: ok')
