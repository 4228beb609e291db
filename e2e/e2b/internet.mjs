// E2B's default network on a daemon whose operator opted in
// (--e2b-internet; network/stack's TestE2BInternetDefault runs it in front
// of a fake internet): a create that names no network gets the open
// internet and public ports, one that names a network without
// allowPublicTraffic public ports, as on E2B; a tenant whose cap does not allow
// mode open keeps sandlot's default, no network. Then auto-resume by
// traffic through a port. E2B_API_KEY is the open tenant's key,
// CLOSED_KEY the other's; DAEMON is the daemon's host:port.
// Prints "ok" when every check passed; throws otherwise.
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from 'e2b'

const [daemonHost, daemonPort] = process.env.DAEMON.split(':')
const wait = (ms) => new Promise((r) => setTimeout(r, ms))

// get asks the daemon for / with Host host (no traffic token), as a
// browser resolving <port>-<id>.sandlot.localhost to loopback would.
function get(host) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: daemonHost, port: daemonPort, path: '/', headers: { host } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

async function serve(sbx) {
  await sbx.commands.run('mkdir -p /tmp/www && echo hello-from-the-sandbox > /tmp/www/index.html')
  await sbx.commands.run('cd /tmp/www && exec python3 -m http.server 8000 --bind 0.0.0.0', { background: true })
  await sbx.commands.run('for i in $(seq 100); do python3 -c "import socket; socket.create_connection((\'127.0.0.1\', 8000), 1)" 2>/dev/null && exit 0; sleep 0.1; done; exit 1')
}

// The open tenant: E2B's defaults.
const open = await Sandbox.create('base', { timeoutMs: 120_000 })
try {
  const info = await open.getInfo()
  assert.equal(info.allowInternetAccess, true)
  assert.equal(info.network.allowPublicTraffic, true)
  const out = await open.commands.run('curl -sS -m 10 http://www.example.test/default-open')
  assert.match(out.stdout, /"Path":"\/default-open"/)
  await serve(open)
  const page = await get(open.getHost(8000))
  assert.equal(page.status, 200, page.body)
  assert.match(page.body, /hello-from-the-sandbox/)
} finally {
  await open.kill()
}

// A network without allowPublicTraffic: public ports, E2B's default.
const allowlisted = await Sandbox.create('base', { network: { allowOut: ['www.example.test'] }, timeoutMs: 120_000 })
try {
  const info = await allowlisted.getInfo()
  assert.equal(info.network.allowPublicTraffic, true)
  assert.deepEqual(info.network.allowOut, ['www.example.test'])
} finally {
  await allowlisted.kill()
}

// A tenant whose cap refuses mode open: no network, as without the setting.
const closed = await Sandbox.create('base', { apiKey: process.env.CLOSED_KEY, timeoutMs: 120_000 })
try {
  const info = await closed.getInfo()
  assert.notEqual(info.allowInternetAccess, true)
  const out = await closed.commands.run('curl -sS -m 5 http://www.example.test/closed || true')
  assert.doesNotMatch(out.stdout, /"Path"/)
} finally {
  await closed.kill()
}

// Auto-resume: paused at its timeout, woken by a request to its port,
// which waits for the resume and gets the page.
const sleeper = await Sandbox.create('base', { timeoutMs: 4_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
try {
  await serve(sleeper)
  let state = 'running'
  for (let i = 0; i < 40 && state !== 'paused'; i++) {
    await wait(500)
    state = (await Sandbox.getInfo(sleeper.sandboxId)).state
  }
  assert.equal(state, 'paused')
  const page = await get(sleeper.getHost(8000))
  assert.equal(page.status, 200, page.body)
  assert.match(page.body, /hello-from-the-sandbox/)
  assert.equal((await sleeper.getInfo()).state, 'running')
} finally {
  await sleeper.kill()
}

// Without autoResume the port answers as a sandbox that is not running.
const paused = await Sandbox.create('base', { timeoutMs: 4_000, lifecycle: { onTimeout: 'pause' } })
try {
  await serve(paused)
  await paused.pause()
  const page = await get(paused.getHost(8000))
  assert.equal(page.status, 502, page.body)
  assert.match(page.body, /The sandbox is paused/)
  assert.equal((await Sandbox.getInfo(paused.sandboxId)).state, 'paused')
} finally {
  await paused.kill()
}
console.log('ok')
