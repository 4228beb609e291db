// The E2B SDK's pipInstall and npmInstall against sandlot: a template from
// the default image (which has pip, allowed to install into the sandbox's
// python) gets npm (copied in: the Debian base has none), then pipInstall
// and npmInstall fetch packages from the index INDEX serves (the build's
// network allows it), and a sandbox of the template imports and requires
// them. Configured by E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL; ALIAS
// names the template, CONTEXT_DIR/tools holds npm/, NPM_PACKAGE and
// PY_PACKAGE are the index's packages. Prints "ok" when every check passed.
import assert from 'node:assert/strict'
import { Sandbox, Template } from 'e2b'

const { ALIAS: alias, INDEX: index, NPM_PACKAGE: npmPkg, PY_PACKAGE: pyPkg } = process.env
const host = new URL(index).hostname

const t = Template({ fileContextPath: process.env.CONTEXT_DIR })
  .fromImage('default')
  .copy('tools', '/opt/tools')
  .runCmd('ln -s /opt/tools/npm/bin/npm-cli.js /usr/local/bin/npm', { user: 'root' })
  .setEnvs({
    PIP_INDEX_URL: `${index}/simple/`, PIP_TRUSTED_HOST: host,
    npm_config_registry: `${index}/npm/`, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false',
  })
  .pipInstall([pyPkg])
  .npmInstall([npmPkg], { g: true })
  .setWorkdir('/home/user')
  .setUser('user')
  .npmInstall([npmPkg])

const logs = []
try {
  await Template.build(t, alias, { onBuildLogs: (e) => logs.push(e.message) })
} catch (err) {
  console.error(logs.join('\n'))
  throw err
}
assert.ok(logs.some((l) => l.includes(`pip install ${pyPkg}`)), 'the log names pip install: ' + logs.join('\n'))

const sbx = await Sandbox.create(alias, { timeoutMs: 120_000 })
try {
  const py = await sbx.commands.run('python3 -c "import sandlot_demo; print(sandlot_demo.hello())"')
  assert.equal(py.stdout, 'hello from a wheel\n')
  const js = await sbx.commands.run(`node -e "console.log(require('${npmPkg}').hello())"`, { cwd: '/home/user' })
  assert.equal(js.stdout, 'hello from an npm package\n')
  const owner = await sbx.commands.run(`stat -c %U /home/user/node_modules/${npmPkg}/package.json`)
  assert.equal(owner.stdout, 'user\n', 'the local install is the user\'s')
  const bin = await sbx.commands.run(npmPkg)
  assert.equal(bin.stdout, 'hello from an npm package (bin)\n', 'the global install put its bin on PATH')
} finally {
  await sbx.kill()
}
console.log('ok')
