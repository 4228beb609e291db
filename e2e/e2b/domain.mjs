// The E2B SDK with a domain and no sandbox URL (run by TestE2BDomain in
// network/stack): the create returns the daemon's domain, and the SDK
// reaches envd at https://49983-<sandboxId>.<domain>.
import assert from 'node:assert/strict'
import dns from 'node:dns'
import { Sandbox } from 'e2b'

// Names under .localhost are loopback (RFC 6761); glibc without
// nss-myhostname does not say so, so the test answers them here.
const systemLookup = dns.lookup
dns.lookup = (host, opts, cb) => {
  if (typeof opts === 'function') { cb = opts; opts = {} }
  if (typeof opts === 'number') opts = { family: opts }
  if (!String(host).endsWith('.localhost')) return systemLookup(host, opts, cb)
  if (opts && opts.all) return process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }])
  process.nextTick(cb, null, '127.0.0.1', 4)
}

assert.equal(process.env.E2B_SANDBOX_URL, undefined, 'the test is about the domain form')
const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
try {
  assert.equal(sbx.sandboxDomain, 'sandlot.localhost')
  assert.equal(sbx.getHost(49983), `49983-${sbx.sandboxId}.sandlot.localhost`)
  await sbx.files.write('/home/user/by-domain.txt', 'through the domain\n')
  assert.equal(await sbx.files.read('/home/user/by-domain.txt'), 'through the domain\n')
  const r = await sbx.commands.run('echo $((6*7)); cat /home/user/by-domain.txt')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, '42\nthrough the domain\n')
  const entries = await sbx.files.list('/home/user')
  assert.ok(entries.some((e) => e.name === 'by-domain.txt'), JSON.stringify(entries))
} finally {
  await sbx.kill()
}
console.log('ok')
