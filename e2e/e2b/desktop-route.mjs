// A page served by one sandbox, opened in a desktop's browser through the
// ports route (run by TestDesktopRoute in e2e/desktop): sandbox A (the E2B
// SDK, public ports, no egress) serves a page on 8000; the desktop
// (@e2b/desktop, no egress) opens http://<A.getHost(8000)>/ in Chromium,
// which sends *.<domain> to its gateway, where the daemon's egress proxy
// answers the ports route in process. The page's title is seen in the
// browser's window title and on its DevTools endpoint, and the screen is
// not blank. Prints "ok" when every check passed; throws otherwise.
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import zlib from 'node:zlib'
import { Sandbox } from 'e2b'
import { Sandbox as Desktop } from '@e2b/desktop'
import { poll } from './poll.mjs'

const marker = 'sandlot-route-' + crypto.randomBytes(4).toString('hex')

// colours counts the distinct colours of an 8-bit RGB or RGBA PNG
// (non-interlaced, as scrot writes it), up to limit.
function colours (buf, limit = 10_000) {
  const b = Buffer.from(buf)
  let off = 8; let width = 0; let height = 0; let type = 0; const idat = []
  while (off < b.length) {
    const len = b.readUInt32BE(off); const kind = b.subarray(off + 4, off + 8).toString('latin1')
    const data = b.subarray(off + 8, off + 8 + len)
    if (kind === 'IHDR') { width = data.readUInt32BE(0); height = data.readUInt32BE(4); assert.equal(data[8], 8, 'bit depth'); type = data[9] }
    if (kind === 'IDAT') idat.push(data)
    off += 12 + len
  }
  const bpp = type === 6 ? 4 : 3
  assert.ok(type === 2 || type === 6, `colour type ${type}`)
  const raw = zlib.inflateSync(Buffer.concat(idat))
  const stride = width * bpp
  let prev = Buffer.alloc(stride)
  const seen = new Set()
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)]
    const line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)))
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? line[x - bpp] : 0; const up = prev[x]; const c = x >= bpp ? prev[x - bpp] : 0
      let p = 0
      if (f === 1) p = a
      else if (f === 2) p = up
      else if (f === 3) p = (a + up) >> 1
      else if (f === 4) { const q = a + up - c; const pa = Math.abs(q - a); const pb = Math.abs(q - up); const pc = Math.abs(q - c); p = pa <= pb && pa <= pc ? a : pb <= pc ? up : c }
      line[x] = (line[x] + p) & 0xff
    }
    for (let x = 0; x < stride; x += bpp) {
      seen.add((line[x] << 16) | (line[x + 1] << 8) | line[x + 2])
      if (seen.size >= limit) return seen.size
    }
    prev = line
  }
  return seen.size
}

const a = await Sandbox.create('base', { network: { allowPublicTraffic: true }, timeoutMs: 600_000 })
let desk
try {
  console.log(`server ${a.sandboxId}`)
  await a.files.write('/tmp/www/index.html', `<html><head><title>${marker}</title></head><body style="background:#2a6"><h1>${marker}</h1><p>served by another sandbox</p></body></html>`)
  await a.commands.run('cd /tmp/www && exec python3 -m http.server 8000 --bind 0.0.0.0', { background: true, timeoutMs: 0 })
  await poll('page server', async () => (await a.commands.run('curl -fsS http://127.0.0.1:8000/')).stdout.includes(marker))
  const host = a.getHost(8000)
  assert.equal(host, `8000-${a.sandboxId}.sandlot.localhost`)

  desk = await Desktop.create({ timeoutMs: 600_000, resolution: [1024, 768] })
  console.log(`desktop ${desk.sandboxId}`)
  const info = await desk.getInfo()
  assert.equal(info.allowInternetAccess, false, 'the desktop has no egress')

  const url = `http://${host}/`
  await desk.open(url)
  const win = await poll('the page in Chromium', async () => (await desk.commands.run(`xdotool search --name ${marker} || true`)).stdout.trim().split('\n')[0], 180_000)
  const title = await desk.getWindowTitle(win)
  assert.match(title, new RegExp(marker), 'the browser window shows the page title')
  const targets = await poll('devtools', async () => (await desk.commands.run('curl -fsS http://127.0.0.1:9222/json/list')).stdout)
  const page = JSON.parse(targets).find((t) => t.type === 'page' && t.url.startsWith(url))
  assert.ok(page, `no page at ${url}: ${targets}`)
  assert.equal(page.title, marker)

  const shot = await desk.screenshot()
  const n = colours(shot)
  console.log(`screenshot ${shot.length} bytes, ${n} colours, window "${title}"`)
  assert.ok(n > 100, `the screen is (nearly) blank: ${n} colours`)
} catch (e) {
  if (desk) {
    const d = await desk.commands.run('ps -eo pid,args | grep -i chrom | cut -c1-300; cat /etc/chromium.d/sandlot-ports; cat /etc/resolv.conf', { timeoutMs: 20_000 }).catch((err) => ({ stdout: String(err) }))
    console.log('DIAG\n' + d.stdout)
  }
  throw e
} finally {
  if (desk) await desk.kill()
  await a.kill()
}
console.log('ok')
