// The E2B SDK against a sandlot daemon with sandbox networks
// (network/stack's TestE2BNetwork runs it inside a private network
// namespace, in front of a fake internet). Configured by E2B_API_KEY,
// E2B_API_URL and E2B_SANDBOX_URL; DAEMON is the daemon's host:port.
// Prints "ok" when every check passed; throws otherwise.
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from 'e2b'

const [daemonHost, daemonPort] = process.env.DAEMON.split(':')

// get asks the daemon for path with Host host, as a browser resolving
// <port>-<id>.sandlot.localhost to loopback would.
function get(host, path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: daemonHost, port: daemonPort, path, headers: { host, ...headers } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

const sbx = await Sandbox.create('base', { network: { allowPublicTraffic: false }, timeoutMs: 120_000 })
try {
  // getInfo reflects the policy: no internet, private ports.
  let info = await sbx.getInfo()
  assert.equal(info.allowInternetAccess, false)
  assert.equal(info.network.allowPublicTraffic, false)

  // A web server in the sandbox, reached through getHost.
  await sbx.commands.run('mkdir -p /tmp/www && echo hello-from-the-sandbox > /tmp/www/index.html')
  await sbx.commands.run('cd /tmp/www && exec python3 -m http.server 8000 --bind 0.0.0.0', { background: true })
  await sbx.commands.run('for i in $(seq 100); do python3 -c "import socket; socket.create_connection((\'127.0.0.1\', 8000), 1)" 2>/dev/null && exit 0; sleep 0.1; done; exit 1')
  const host = sbx.getHost(8000)
  assert.equal(host, `8000-${sbx.sandboxId}.sandlot.localhost`)
  const ok = await get(host, '/index.html', { 'e2b-traffic-access-token': sbx.trafficAccessToken })
  assert.equal(ok.status, 200, ok.body)
  assert.match(ok.body, /hello-from-the-sandbox/)
  const noToken = await get(host, '/index.html')
  assert.equal(noToken.status, 403, noToken.body)
  const badToken = await get(host, '/index.html', { 'e2b-traffic-access-token': sbx.trafficAccessToken + 'x' })
  assert.equal(badToken.status, 403, badToken.body)
  const closed = await get(sbx.getHost(8001), '/', { 'e2b-traffic-access-token': sbx.trafficAccessToken })
  assert.equal(closed.status, 502, closed.body)

  // No egress until updateNetwork allows a domain.
  const before = await sbx.commands.run('curl -sS -m 10 http://www.example.test/before || true')
  assert.doesNotMatch(before.stdout, /"Path"/)
  await sbx.updateNetwork({ allowOut: ['www.example.test'] })
  info = await sbx.getInfo()
  assert.deepEqual(info.network.allowOut, ['www.example.test'])
  assert.equal(info.network.allowPublicTraffic, false)
  const after = await sbx.commands.run('curl -sS -m 10 http://www.example.test/after')
  assert.match(after.stdout, /"Path":"\/after"/)
  const other = await sbx.commands.run('curl -sS -m 10 http://web2.test/ || true')
  assert.doesNotMatch(other.stdout, /"Server"/)

  // allowInternetAccess true is a request, met up to the operator's cap:
  // this tenant may not have mode open, so no egress, and public ports,
  // E2B's default, which the cap allows.
  const asked = await Sandbox.create('base', { allowInternetAccess: true, timeoutMs: 60_000 })
  try {
    info = await asked.getInfo()
    assert.equal(info.allowInternetAccess, false)
    assert.equal(info.network.allowPublicTraffic, true)
    const out = await asked.commands.run('curl -sS -m 10 http://www.example.test/asked || true')
    assert.doesNotMatch(out.stdout, /"Path"/)
    // Public, as on E2B: the port answers without the traffic token.
    await asked.commands.run('mkdir -p /tmp/www && echo public-by-default > /tmp/www/index.html')
    await asked.commands.run('cd /tmp/www && exec python3 -m http.server 8000 --bind 0.0.0.0', { background: true })
    await asked.commands.run('for i in $(seq 100); do python3 -c "import socket; socket.create_connection((\'127.0.0.1\', 8000), 1)" 2>/dev/null && exit 0; sleep 0.1; done; exit 1')
    const page = await get(asked.getHost(8000), '/index.html')
    assert.equal(page.status, 200, page.body)
    assert.match(page.body, /public-by-default/)
  } finally {
    await asked.kill()
  }
  // The open internet named explicitly (minus a range) is refused (403).
  await assert.rejects(Sandbox.create('base', { allowInternetAccess: true, network: { denyOut: ['10.0.0.0/8'] } }), /403|denied|not allowed|may not/i)
} finally {
  await sbx.kill()
}
console.log('ok')
