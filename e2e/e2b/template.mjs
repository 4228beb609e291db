// The E2B SDK's Template.build against sandlot: a template from a local
// image with runCmd, copy, setEnvs, setWorkdir, setUser and setStartCmd is
// built through sandlot's sandboxes and recorded as a template of the
// key's tenant, then Sandbox.create(alias) shows every step's effect and
// the start command's (run in the background, waited for by its ready
// command); Sandbox.deleteSnapshot (DELETE /templates/{id}) deletes it. Configured by E2B_API_KEY, E2B_API_URL,
// E2B_SANDBOX_URL; ALIAS names the template, CONTEXT_DIR holds app.txt,
// BASE is the image to start from. Prints "ok" when every check passed.
import assert from 'node:assert/strict'
import { Sandbox, Template, waitForFile } from 'e2b'

const alias = process.env.ALIAS
const base = process.env.BASE

assert.equal(await Template.exists(alias), false, 'no template before the build')

const t = Template({ fileContextPath: process.env.CONTEXT_DIR })
  .fromImage(base)
  .runCmd('echo "built by $(id -u)" > /opt/marker', { user: 'root' })
  .copy('app.txt', '/opt/app/', { user: 'user', mode: 0o640 })
  .setEnvs({ GREETING: 'hello there' })
  .setWorkdir('/home/user')
  .setUser('user')
  .runCmd('echo "$GREETING from $(id -u) in $(pwd)" > from-user.txt')
  .setStartCmd('sleep 0.3; echo "started by $(id -u) in $(pwd)" > /tmp/start-marker; exec sleep infinity', waitForFile('/tmp/start-marker'))

const logs = []
const info = await Template.build(t, alias, { onBuildLogs: (e) => logs.push(e.message) })
assert.match(info.templateId, /^[a-z0-9]{20}$/, 'a template id of its own')
assert.equal(info.alias, alias)
assert.ok(logs.some((l) => l.includes('runCmd') || l.includes('RUN')), 'build logs name the steps: ' + logs.join('\n'))
assert.equal(await Template.exists(alias), true, 'the template exists after the build')

const sbx = await Sandbox.create(alias, { timeoutMs: 120_000 })
try {
  const r = await sbx.commands.run('cat /opt/marker /opt/app/app.txt /home/user/from-user.txt; stat -c "%U %a" /opt/app/app.txt; echo "$GREETING"')
  assert.equal(r.stdout, 'built by 0\nfrom the context\nhello there from 1000 in /home/user\nuser 640\nhello there\n')
  // The start command ran, and create waited for its ready command.
  const s = await sbx.commands.run('cat /tmp/start-marker; grep -qx sleep /proc/[0-9]*/comm && echo still running')
  assert.equal(s.stdout, 'started by 1000 in /home/user\nstill running\n')
} finally {
  await sbx.kill()
}
// The template id starts it too.
const byID = await Sandbox.create(info.templateId, { timeoutMs: 60_000 })
await byID.kill()

// Tags: the build is the alias's "latest"; assignTags adds one, which
// Sandbox.create and Template.exists take as "alias:tag"; removeTags
// removes it.
assert.deepEqual(info.tags, ['latest'])
const assigned = await Template.assignTags(`${alias}:latest`, ['v2'])
assert.deepEqual(assigned.tags, ['v2'])
assert.equal(await Template.exists(`${alias}:v2`), true)
assert.deepEqual((await Template.getTags(alias)).map((x) => x.tag), ['latest', 'v2'])
const byTag = await Sandbox.create(`${alias}:v2`, { timeoutMs: 60_000 })
try {
  assert.equal((await byTag.commands.run('cat /opt/marker')).stdout, 'built by 0\n')
} finally {
  await byTag.kill()
}
await Template.removeTags(alias, 'v2')
assert.equal(await Template.exists(`${alias}:v2`), false)
// A name exists once any of its tags was built, latest or not.
assert.equal(await Template.exists(`${alias}-tagged`), false)
await Template.build(Template().fromImage(base).runCmd('true'), `${alias}-tagged:v1`)
assert.equal(await Template.exists(`${alias}-tagged`), true, 'a name with only a v1 build exists')
assert.equal(await Template.exists(`${alias}-tagged:latest`), false, 'but it has no latest')

// A failing step fails Template.build with the step's output.
const bad = Template().fromImage(base).runCmd('echo the-reason-it-failed; exit 5')
await assert.rejects(Template.build(bad, alias + '-bad'), (err) => {
  assert.match(err.message, /exit code 5/)
  assert.match(err.message, /the-reason-it-failed/)
  return true
})
assert.equal(await Template.exists(alias + '-bad'), false)
// Without --build-pull, an image the store lacks is not pulled: the daemon
// connects to no registry a tenant names.
await assert.rejects(Template.build(Template().fromImage('127.0.0.1:1/x:1').runCmd('true'), alias + '-nopull'), (err) => {
  assert.match(err.message, /not found/)
  return true
})

// With APT_PACKAGE, aptInstall through the build's allowlisted network.
if (process.env.APT_PACKAGE) {
  const pkg = process.env.APT_PACKAGE
  const apt = Template().fromImage(base).aptInstall([pkg], { noInstallRecommends: true })
  await Template.build(apt, alias + '-apt', { onBuildLogs: (e) => process.stderr.write(e.message + '\n') })
  const s2 = await Sandbox.create(alias + '-apt', { timeoutMs: 120_000 })
  try {
    const r = await s2.commands.run(`dpkg -s ${pkg} | grep '^Status'; command -v ${pkg}`)
    assert.equal(r.stdout, `Status: install ok installed\n/usr/bin/${pkg}\n`)
  } finally {
    await s2.kill()
  }
}
// Delete: the SDK's deleteSnapshot is E2B's DELETE /templates/{templateID}.
assert.equal(await Sandbox.deleteSnapshot(info.templateId), true)
assert.equal(await Template.exists(alias), false, 'no template after the delete')
assert.equal(await Sandbox.deleteSnapshot(info.templateId), false, 'a second delete finds nothing')
await assert.rejects(Sandbox.create(alias, { timeoutMs: 60_000 }))
console.log('ok')
