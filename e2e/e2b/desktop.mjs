// The E2B desktop SDK, unchanged, against sandlot serve (run by
// TestDesktopSDK in e2e/desktop): create, screenshots, mouse and keyboard,
// a text editor, a browser, the noVNC stream with and without auth through
// the port route (https://6080-<id>.<domain>, the URL the SDK builds from
// the domain create returns), then kill.
import assert from 'node:assert/strict'
import dns from 'node:dns'
import https from 'node:https'
import crypto from 'node:crypto'
import { Sandbox } from '@e2b/desktop'
import { poll } from './poll.mjs'

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

const W = 1024, H = 768
const figures = {}
const t0 = Date.now()
const desk = await Sandbox.create({ timeoutMs: 600_000, resolution: [W, H] })
figures.createMs = Date.now() - t0
console.log(`sandbox ${desk.sandboxId}`)

// pngSize reads a PNG's width and height from its IHDR chunk.
function pngSize (buf) {
  const b = Buffer.from(buf)
  assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature')
  assert.equal(b.subarray(12, 16).toString('latin1'), 'IHDR')
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20), bytes: b.length }
}

// wsFrames opens a WebSocket on url (an https URL through the route) and
// returns the payloads of the first frames the server sends, after
// sending each of send (masked, as a client must).
function wsExchange (url, send = [], frames = 1) {
  const u = new URL(url)
  const key = crypto.randomBytes(16).toString('base64')
  return new Promise((resolve, reject) => {
    const req = https.request({
      host: u.hostname, port: u.port || 443, path: u.pathname + u.search, servername: u.hostname,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Protocol': 'binary' }
    })
    req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)))
    req.on('error', reject)
    req.on('upgrade', (res, socket) => {
      const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
      if (res.headers['sec-websocket-accept'] !== accept) { socket.destroy(); return reject(new Error(`bad Sec-WebSocket-Accept: ${JSON.stringify(res.headers)} want ${accept}`)) }
      let buf = Buffer.alloc(0)
      const got = []
      const pending = [...send]
      socket.on('data', (d) => {
        buf = Buffer.concat([buf, d])
        while (buf.length >= 2) {
          let len = buf[1] & 0x7f; let off = 2
          if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4 }
          if (buf.length < off + len) return
          got.push(buf.subarray(off, off + len)); buf = buf.subarray(off + len)
          if (got.length >= frames) { socket.destroy(); return resolve(got) }
          const next = pending.shift()
          if (next) socket.write(maskFrame(next))
        }
      })
      socket.on('error', reject)
    })
    req.end()
  })
}

function maskFrame (payload) {
  const p = Buffer.from(payload)
  const mask = crypto.randomBytes(4)
  const head = Buffer.from([0x82, 0x80 | p.length])
  const body = Buffer.from(p.map((b, i) => b ^ mask[i % 4]))
  return Buffer.concat([head, mask, body])
}

function get (url) {
  return new Promise((resolve, reject) => {
    https.get(url, (res) => {
      let body = ''
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    }).on('error', reject)
  })
}

try {
  assert.equal(desk.sandboxDomain, 'sandlot.localhost', 'create returns the ports domain')

  // Screenshots: a PNG of the screen's size.
  let s = Date.now()
  const shot = await desk.screenshot()
  figures.firstScreenshotMs = Date.now() - t0
  figures.screenshotMs = Date.now() - s
  assert.deepEqual((({ width, height }) => ({ width, height }))(pngSize(shot)), { width: W, height: H })
  assert.deepEqual(await desk.getScreenSize(), { width: W, height: H })

  // Mouse.
  s = Date.now()
  await desk.moveMouse(123, 234)
  figures.moveMs = Date.now() - s
  assert.deepEqual(await desk.getCursorPosition(), { x: 123, y: 234 })
  await desk.leftClick(500, 400)
  await desk.scroll('down', 2)

  // The pids limit holds a full desktop: count its tasks.
  const tasks = await desk.commands.run('ps -eL --no-headers | wc -l')
  figures.tasksAfterStart = Number(tasks.stdout.trim())

  // A text editor: type into mousepad, save with ctrl+s, read the file.
  const note = '/home/user/note.txt'
  await desk.files.write(note, '')
  await desk.launch('org.xfce.mousepad', note)
  const win = await poll('mousepad window', async () => (await desk.getApplicationWindows('mousepad')).filter(Boolean)[0])
  await desk.commands.run(`xdotool windowactivate --sync ${win}`)
  assert.match(await desk.getWindowTitle(win), /note\.txt/)
  const text = 'Hello from sandlot 42'
  s = Date.now()
  await desk.write(text, { chunkSize: 50, delayInMs: 5 })
  figures.typeMs = Date.now() - s
  await desk.press(['ctrl', 's'])
  await poll('saved text', async () => (await desk.files.read(note)).includes(text))

  // The browser: a page served in the sandbox opened through xdg-open
  // (the default browser), seen by its title and on the DevTools endpoint.
  await desk.files.write('/home/user/www/page.html', '<html><head><title>sandlot-page</title></head><body><h1>sandlot page</h1></body></html>')
  await desk.commands.run('cd /home/user/www && python3 -m http.server 8000 --bind 127.0.0.1', { background: true, timeoutMs: 0 })
  await poll('page server', async () => (await desk.commands.run('curl -fsS http://127.0.0.1:8000/page.html')).stdout.includes('sandlot page'))
  await desk.open('http://127.0.0.1:8000/page.html')
  await poll('chromium window', async () => (await desk.commands.run('xdotool search --name sandlot-page')).stdout.trim(), 120_000)
  const targets = await poll('devtools', async () => (await desk.commands.run('curl -fsS http://127.0.0.1:9222/json/list')).stdout)
  assert.match(targets, /sandlot-page/)
  figures.tasksWithBrowser = Number((await desk.commands.run('ps -eL --no-headers | wc -l')).stdout.trim())
  const browserShot = await desk.screenshot()
  pngSize(browserShot)

  // The stream, without auth: the page and a VNC handshake through the
  // WebSocket, both through https://6080-<id>.<domain>.
  await desk.stream.start()
  const url = desk.stream.getUrl()
  const u = new URL(url)
  assert.equal(u.host, `6080-${desk.sandboxId}.sandlot.localhost`)
  assert.equal(u.pathname, '/vnc.html')
  assert.equal(u.searchParams.get('autoconnect'), 'true')
  const page = await get(url)
  assert.equal(page.status, 200)
  assert.match(page.body, /noVNC/)
  const ws = `https://${u.host}/websockify`
  let frames = await wsExchange(ws, ['RFB 003.008\n'], 2)
  assert.match(frames[0].toString('latin1'), /^RFB 003\.00\d\n/)
  assert.deepEqual([...frames[1]], [1, 1], 'no auth: one security type, None')
  await desk.stream.stop()
  // stop() signals x11vnc; it is gone once it has handled the signal.
  await poll('x11vnc ends after stream.stop()', async () =>
    (await desk.commands.run('pgrep -x x11vnc || true')).stdout.trim() === '', 10_000)

  // With auth: the URL carries the key and the server asks for VNC auth.
  await desk.stream.start({ requireAuth: true })
  const key = desk.stream.getAuthKey()
  const authURL = new URL(desk.stream.getUrl({ authKey: key }))
  assert.equal(authURL.searchParams.get('password'), key)
  assert.equal((await get(authURL.toString())).status, 200)
  frames = await wsExchange(ws, ['RFB 003.008\n'], 2)
  assert.deepEqual([...frames[1]], [1, 2], 'auth: one security type, VNC authentication')
  await desk.stream.stop()

  console.log('FIGURES ' + JSON.stringify(figures))
} catch (e) {
  // What the desktop ran, for the failure's log.
  const d = await desk.commands.run('ps -eo pid,etime,pcpu,rss,args --sort=pid | cut -c1-160; tail -n 20 /tmp/*.log', { timeoutMs: 20_000 }).catch((err) => ({ stdout: String(err) }))
  console.log('DIAG\n' + d.stdout)
  throw e
} finally {
  await desk.kill()
}
assert.equal(await Sandbox.connect(desk.sandboxId).then(() => 'alive', () => 'gone'), 'gone')
console.log('ok')
