// E2B's JS SDKs, new (e2b 2.51) and old (e2b 2.45, which sends
// allow_internet_access: true on every create, as the Python SDK does),
// against `sandlot serve` with default settings (TestE2BDefaultDaemon):
// every create that asks for the internet only as the SDK's default gets
// a sandbox, without a network since the operator allows none, and the
// SDK and the sandbox's processes can see so: getInfo says
// allowInternetAccess false, a name does not resolve and /etc/resolv.conf
// says why. A request for more than the operator allows, named
// explicitly, is refused (403); an allowlist, which this daemon cannot
// build, is a 412. Prints "ok" when every check passed;
// throws otherwise.
import assert from 'node:assert/strict'
import { Sandbox as Sandbox251 } from 'e2b'
import { Sandbox as Sandbox245 } from 'e2b-245'

const creates = [
  ['e2b 2.51, no network named', Sandbox251, {}],
  ['e2b 2.51, allowInternetAccess true', Sandbox251, { allowInternetAccess: true }],
  ['e2b 2.45, its default (allow_internet_access true)', Sandbox245, {}],
]
for (const [name, Sandbox, opts] of creates) {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, ...opts })
  try {
    const info = await sbx.getInfo()
    assert.equal(info.allowInternetAccess, false, `${name}: getInfo().allowInternetAccess`)
    assert.equal(info.network, undefined, `${name}: getInfo().network`)
    const hi = await sbx.commands.run('echo hi')
    assert.equal(hi.stdout, 'hi\n', name)
    const out = await sbx.commands.run('curl -sS -m 10 http://example.com/ 2>&1; echo "exit $?"; cat /etc/resolv.conf')
    assert.match(out.stdout, /Could not resolve host: example\.com/, name)
    assert.doesNotMatch(out.stdout, /exit 0/, name)
    assert.match(out.stdout, /This sandbox has no network/, name)
  } finally {
    await sbx.kill()
  }
}

// Named beyond the operator's cap: the open internet minus a range is a
// request for mode open itself, not the SDK's default.
for (const Sandbox of [Sandbox251, Sandbox245]) {
  await assert.rejects(
    Sandbox.create('base', { allowInternetAccess: true, network: { denyOut: ['10.0.0.0/8'] }, timeoutMs: 60_000 }),
    /403|open internet access is not allowed/,
  )
}
// An allowlist named explicitly is within the cap, but this daemon builds
// no sandbox networks (serve --network): a clear 412, never a sandbox
// that silently lacks what was asked.
await assert.rejects(
  Sandbox245.create('base', { network: { allowOut: ['example.com'] }, timeoutMs: 60_000 }),
  /412: sandbox networks are not enabled on this daemon/,
)
console.log('ok')
