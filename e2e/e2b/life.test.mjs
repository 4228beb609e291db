// Envd and lifecycle behaviours of the official SDK against sandlot, as on
// E2B: files (gzip, signed URLs, metadata), commands (users, timeouts,
// stdin, connect) and the sandbox lifecycle (absolute timeout, list
// filters, metrics). Test names start with "life:" (E2E_FILTER=life:).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { gzipSync } from 'node:zlib'
import { Sandbox, CommandExitError, SandboxError, TimeoutError } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const run = `life-${process.pid}-${Date.now()}`
let sbx
let home

before(async () => {
  sbx = await Sandbox.create('base', { metadata: { suite: run }, timeoutMs: 300_000 })
  home = (await sbx.commands.run('echo $HOME')).stdout.trim()
})

after(async () => {
  if (sbx) await Sandbox.kill(sbx.sandboxId)
})

test('life: files.write with gzip stores the inflated bytes', async () => {
  const text = 'gzip me '.repeat(1000)
  await sbx.files.write(`${home}/gz.txt`, text, { gzip: true })
  assert.equal(await sbx.files.read(`${home}/gz.txt`), text)
  assert.equal((await sbx.commands.run(`wc -c < ${home}/gz.txt`)).stdout.trim(), String(text.length))
  // a raw gzip body through the same route as the SDK: inflated too
  const url = await sbx.uploadUrl(`${home}/raw.bin`)
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' }, body: gzipSync(Buffer.from('raw inflated')) })
  assert.equal(res.status, 200, await res.clone().text())
  assert.equal(await sbx.files.read(`${home}/raw.bin`), 'raw inflated')
})

test('life: remove of a missing file is a no-op', async () => {
  await sbx.files.remove(`${home}/never-there`)
  await sbx.files.write(`${home}/gone.txt`, 'x')
  await sbx.files.remove(`${home}/gone.txt`)
  assert.equal(await sbx.files.exists(`${home}/gone.txt`), false)
})

test('life: entry info has the envd metadata fields, symlinkTarget absolute', async () => {
  await sbx.files.write(`${home}/meta.txt`, 'four')
  await sbx.commands.run(`chmod 640 ${home}/meta.txt && ln -sfn meta.txt ${home}/link.txt`)
  const info = await sbx.files.getInfo(`${home}/meta.txt`)
  assert.equal(info.type, 'file')
  assert.equal(info.size, 4)
  assert.equal(info.mode, 0o640)
  assert.equal(info.permissions, '-rw-r-----')
  assert.equal(info.owner, 'user')
  assert.equal(info.group, 'user')
  assert.ok(info.modifiedTime instanceof Date && Math.abs(info.modifiedTime.getTime() - Date.now()) < 120_000, `modifiedTime ${info.modifiedTime}`)
  const link = await sbx.files.getInfo(`${home}/link.txt`)
  assert.equal(link.type, 'symlink')
  assert.equal(link.symlinkTarget, `${home}/meta.txt`)
  const listed = (await sbx.files.list(home)).find((e) => e.name === 'link.txt')
  assert.equal(listed.symlinkTarget, `${home}/meta.txt`)
})

test('life: signed uploadUrl and downloadUrl', async () => {
  const path = `${home}/signed.txt`
  const up = await sbx.uploadUrl(path, { useSignatureExpiration: 60 })
  assert.match(up, /signature=v1_/)
  const form = new FormData()
  form.append('file', new Blob(['signed bytes']), path)
  const res = await fetch(up, { method: 'POST', body: form })
  assert.equal(res.status, 200, await res.clone().text())
  const down = await sbx.downloadUrl(path)
  const got = await fetch(down)
  assert.equal(got.status, 200)
  assert.equal(await got.text(), 'signed bytes')
  // the signature covers the path and the operation
  const other = new URL(down)
  other.searchParams.set('path', `${home}/gz.txt`)
  assert.equal((await fetch(other)).status, 401)
  assert.equal((await fetch(down, { method: 'POST', body: form })).status, 401)
  // an expired signature is refused
  const old = new URL(await sbx.downloadUrl(path, { useSignatureExpiration: 60 }))
  old.searchParams.set('signature_expiration', String(Math.floor(Date.now() / 1000) - 10))
  assert.equal((await fetch(old)).status, 401)
  // signed by the SDK with an expiration in the past: envd's own answer
  const expired = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: -10_000 }))
  assert.equal(expired.status, 401)
  assert.deepEqual(await expired.json(), { code: 401, message: 'signature is already expired' })
})

// E2E_ROOT=1: the sandboxes are on an image template, whose agent is root of
// the sandbox's user namespace. Without it (the host template) root is
// refused clearly and never run as user.
const hasRoot = process.env.E2E_ROOT === '1'

test('life: user root is refused clearly where the template has no root', { skip: hasRoot }, async () => {
  await assert.rejects(sbx.commands.run('id -u', { user: 'root' }), (e) => {
    assert.ok(e instanceof SandboxError && !(e instanceof CommandExitError), `got ${e}`)
    assert.match(e.message, /root is not available/)
    return true
  })
  await assert.rejects(sbx.files.read('/etc/hostname', { user: 'root' }), /root is not available/)
  await assert.rejects(sbx.files.write(`${home}/r.txt`, 'x', { user: 'root' }), /root is not available/)
  assert.equal((await sbx.commands.run('id -un', { user: 'user' })).stdout.trim(), 'user')
  // no root, so no sudo: E2B's commands run in a login shell, which says why
  await assert.rejects(sbx.commands.run('sudo id -u'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.match(e.stderr, /sudo: not available in this sandbox: its template \(host\) has no root/)
    return true
  })
})

test('life: the code interpreter answers its health check inside the sandbox (E2B systemd test)', { skip: !hasRoot }, async () => {
  const health = 'curl -s -o /dev/null -w "%{http_code}" http://0.0.0.0:49999/health'
  assert.equal((await sbx.commands.run(health)).stdout.trim(), '200')
  // Nothing else is served there.
  const other = 'curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:49999/execute'
  assert.equal((await sbx.commands.run(other)).stdout.trim(), '404')
})

test('life: commands and files as root', { skip: !hasRoot }, async () => {
  const r = await sbx.commands.run('id -u; id -un; echo $HOME; pwd', { user: 'root' })
  assert.equal(r.stdout, '0\nroot\n/root\n/root\n')
  // the default stays the unprivileged user, as on E2B
  assert.equal((await sbx.commands.run('id -un; echo $HOME')).stdout, 'user\n/home/user\n')
  assert.equal((await sbx.commands.run('id -un', { user: 'user' })).stdout, 'user\n')
  // files written as root belong to root inside
  await sbx.files.write('/root/secret.txt', 'root only', { user: 'root' })
  await sbx.files.write('/etc/sandlot-root.conf', 'etc', { user: 'root' })
  assert.match((await sbx.commands.run('ls -l /root/secret.txt /etc/sandlot-root.conf', { user: 'root' })).stdout, /-rw-r--r-- 1 root root .*\/etc\/sandlot-root.conf\n-rw-r--r-- 1 root root .*\/root\/secret.txt/)
  const info = await sbx.files.getInfo('/etc/sandlot-root.conf', { user: 'root' })
  assert.equal(info.owner, 'root')
  assert.equal(info.group, 'root')
  assert.equal(await sbx.files.read('/root/secret.txt', { user: 'root' }), 'root only')
  assert.deepEqual((await sbx.files.list('/root', { user: 'root' })).map((e) => e.name).filter((n) => n === 'secret.txt'), ['secret.txt'])
  // relative paths resolve in root's home
  await sbx.files.write('rel.txt', 'r', { user: 'root' })
  assert.equal(await sbx.files.read('/root/rel.txt', { user: 'root' }), 'r')
  // a command of the user's cannot read root's file without sudo
  await assert.rejects(sbx.commands.run('cat /root/secret.txt'), CommandExitError)
  assert.equal((await sbx.commands.run('sudo cat /root/secret.txt')).stdout, 'root only')
  // the user has sudo, so the user's file calls act as root, as envd's do:
  // they read root's files and write anywhere, and what they create is the user's
  assert.equal(await sbx.files.read('/root/secret.txt'), 'root only')
  await sbx.files.write('/etc/sandlot-user.conf', 'x')
  assert.equal((await sbx.files.getInfo('/etc/sandlot-user.conf')).owner, 'user')
  await sbx.files.write('/0/made/by-user.txt', 'u')
  assert.deepEqual((await sbx.commands.run('stat -c %U /0 /0/made /0/made/by-user.txt')).stdout, 'user\nuser\nuser\n')
  // an existing file keeps its owner
  await sbx.files.write('/etc/sandlot-root.conf', 'by user')
  assert.equal((await sbx.files.getInfo('/etc/sandlot-root.conf')).owner, 'root')
  // a user's file is the user's
  await sbx.files.write(`${home}/mine.txt`, 'u')
  assert.equal((await sbx.files.getInfo(`${home}/mine.txt`)).owner, 'user')
  // root's commands can install into the system, as package managers do
  await sbx.commands.run('mkdir -p /opt/tool && echo ok > /opt/tool/x && chown user:user /opt/tool/x', { user: 'root' })
  assert.equal((await sbx.files.getInfo('/opt/tool/x')).owner, 'user')
})

test('life: sudo works for the user, and root of the sandbox cannot touch the agent or the host', { skip: !hasRoot }, async () => {
  const capsOf = async (user) => (await sbx.commands.run("grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status | tr -d '\\t'", { user })).stdout
  assert.equal(await capsOf('user'), 'CapPrm:0000000000000000\nCapEff:0000000000000000\nCapAmb:0000000000000000\n')
  // as on E2B: the user has passwordless sudo (E2B's "sudo echo" test)
  const sudo = await sbx.commands.run('sudo echo "$((6*7))"; sudo id -un; sudo -u user id -un')
  assert.equal(sudo.stdout, '42\nroot\nuser\n')
  assert.equal(sudo.stderr, '')
  // without sudo the user stays the user
  for (const cmd of [
    "python3 -c 'import os; os.setuid(0)'", // no CAP_SETUID
    'kill -TERM 1', // the agent is root's
    'kill -KILL 1',
    'cat /proc/1/environ', // the agent is not dumpable
    'echo x > /proc/1/fd/0',
  ]) {
    await assert.rejects(sbx.commands.run(cmd), CommandExitError, `user: ${cmd}`)
  }
  // root of the sandbox, by sudo or by user: 'root', is root of its namespace only
  for (const cmd of [
    'cat /proc/1/environ',
    'head -c 1 /proc/1/mem',
    'kill -TERM 1 && sleep 1 && kill -0 1 && exit 1', // ignored by init: the agent lives on
    'echo x > /opt/sandlot/sandlot-agent',
    'cat /opt/sandlot/sandlot-agent > /dev/null', // execute-only
    'mount -t tmpfs none /mnt',
    'unshare -U true',
    'echo 1 > /proc/sys/kernel/sysrq',
  ]) {
    await assert.rejects(sbx.commands.run(cmd, { user: 'root' }), CommandExitError, `root: ${cmd}`)
    await assert.rejects(sbx.commands.run(`sudo sh -c '${cmd.replaceAll("'", "'\\''")}'`), CommandExitError, `sudo: ${cmd}`)
  }
  // a link the user plants does not lead a file call into the agent
  await sbx.commands.run('ln -sf /proc/self/environ ~/agent-env; ln -sf /proc/self/mem ~/agent-mem; ln -sf /proc/self/root/opt/sandlot/sandlot-agent ~/agent-bin')
  await assert.rejects(sbx.files.read(`${home}/agent-env`), /permission denied|\/proc or \/sys/)
  await assert.rejects(sbx.files.write(`${home}/agent-mem`, 'x'), /permission denied|\/proc or \/sys/)
  await assert.rejects(sbx.files.write(`${home}/agent-bin`, 'x'))
  await assert.rejects(sbx.files.read(`${home}/agent-bin`))
  // the agent still answers
  assert.equal((await sbx.commands.run('echo alive')).stdout, 'alive\n')
})

test('life: commands timeoutMs 0 is no timeout; a timeout still ends the command', async () => {
  const r = await sbx.commands.run('sleep 1; echo unbounded', { timeoutMs: 0 })
  assert.equal(r.stdout, 'unbounded\n')
  const t0 = Date.now()
  await assert.rejects(sbx.commands.run(`sleep 30; touch ${home}/late`, { timeoutMs: 1500 }))
  assert.ok(Date.now() - t0 < 20_000, 'timeout did not end the command in time')
  await new Promise((res) => setTimeout(res, 500))
  const left = await sbx.commands.list()
  assert.ok(!left.some((p) => p.args.join(' ').includes('sleep 30')), `timed-out command still runs: ${JSON.stringify(left)}`)
})

test('life: commands.connect re-attaches to a running command', async () => {
  const h = await sbx.commands.run(`for i in 1 2 3 4; do echo tick-$i; sleep 0.5; done`, { background: true, timeoutMs: 0 })
  await h.disconnect()
  const seen = []
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
  const res = await again.wait()
  assert.equal(res.exitCode, 0)
  assert.match(res.stdout + seen.join(''), /tick-4/)
  await assert.rejects(sbx.commands.connect(999_999), /not found/)
})

test('life: the timeout is absolute; past endAt the sandbox is gone', async () => {
  const s = await Sandbox.create('base', { metadata: { suite: run, short: 'yes' }, timeoutMs: 6_000 })
  const end = (await s.getInfo()).endAt.getTime()
  for (let i = 0; i < 3; i++) {
    await s.commands.run('true')
    await s.files.write(`/tmp/t${i}`, 'x')
    await new Promise((res) => setTimeout(res, 500))
  }
  assert.equal((await s.getInfo()).endAt.getTime(), end, 'calls moved endAt')
  await s.setTimeout(4_000)
  const moved = (await s.getInfo()).endAt.getTime()
  assert.ok(Math.abs(moved - (Date.now() + 4_000)) < 2_000, `setTimeout set endAt to ${new Date(moved)}`)
  await new Promise((res) => setTimeout(res, Math.max(0, moved - Date.now()) + 1_000))
  assert.equal(await s.isRunning(), false)
  await assert.rejects(s.getInfo(), (e) => e.name === 'SandboxNotFoundError' || /not found|doesn't exist/i.test(e.message))
  const listed = await Sandbox.list({ query: { metadata: { suite: run, short: 'yes' } } }).nextItems()
  assert.equal(listed.length, 0)
  await assert.rejects(s.commands.run('true'))
})

test('life: list honours template, startedAfter and order; metadata is the caller\'s', async () => {
  const tag = `list-${Date.now()}`
  const a = await Sandbox.create('base', { metadata: { suite: run, tag } })
  await new Promise((res) => setTimeout(res, 20))
  const b = await Sandbox.create('code-interpreter-v1', { metadata: { suite: run, tag } })
  await new Promise((res) => setTimeout(res, 20))
  const c = await Sandbox.create('base', { metadata: { suite: run, tag } })
  try {
    const ids = async (opts) => {
      const out = []
      const p = Sandbox.list({ ...opts, query: { metadata: { tag }, ...opts.query } })
      while (p.hasNext) out.push(...(await p.nextItems()).map((s) => s.sandboxId))
      return out
    }
    assert.deepEqual(await ids({}), [c.sandboxId, b.sandboxId, a.sandboxId])
    assert.deepEqual(await ids({ order: 'asc', limit: 2 }), [a.sandboxId, b.sandboxId, c.sandboxId])
    assert.deepEqual(await ids({ order: 'asc', query: { template: 'base' } }), [a.sandboxId, c.sandboxId])
    const bStart = (await b.getInfo()).startedAt
    assert.deepEqual(await ids({ order: 'asc', query: { startedAfter: bStart } }), [b.sandboxId, c.sandboxId])
    assert.deepEqual((await a.getInfo()).metadata, { suite: run, tag })
  } finally {
    await Promise.all([a.kill(), b.kill(), c.kill()])
  }
})

test('life: a sandlot. metadata key is refused, naming the key; other keys work', async () => {
  await assert.rejects(Sandbox.create('base', { metadata: { suite: run, 'sandlot.paused': 'x' } }), /sandlot\.paused/)
  const listed = await Sandbox.list({ query: { metadata: { suite: run, 'sandlot.paused': 'x' } } }).nextItems()
  assert.ok(listed.every((s) => !('sandlot.paused' in s.metadata)))
})

test('life: getMetrics has real figures, memCache, timestampUnix, and honours start/end', async () => {
  await sbx.commands.run('head -c 20000000 /dev/urandom | sha256sum >/dev/null; python3 -c "x=bytearray(50_000_000); import time; time.sleep(0.2)"')
  const m1 = await sbx.getMetrics()
  assert.ok(m1.length >= 1)
  const last = m1[m1.length - 1]
  assert.equal(last.cpuCount, 1)
  assert.ok(last.memUsed > 1_000_000, `memUsed ${last.memUsed}`)
  assert.ok(last.memTotal >= last.memUsed)
  assert.equal(typeof last.memCache, 'number')
  assert.ok(last.cpuUsedPct > 0, `cpuUsedPct ${last.cpuUsedPct}`)
  assert.ok(last.timestamp instanceof Date && Math.abs(last.timestamp.getTime() - Date.now()) < 10_000)
  const raw = await (await fetch(`${process.env.E2B_API_URL}/sandboxes/${sbx.sandboxId}/metrics`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json()
  assert.equal(typeof raw[0].timestampUnix, 'number')
  assert.equal(typeof raw[0].memCache, 'number')
  const none = await sbx.getMetrics({ start: new Date(Date.now() + 3_600_000) })
  assert.deepEqual(none, [])
})

test('life: files.watchDir reports creates, writes and removes', async () => {
  const dir = `${home}/watched`
  await sbx.files.makeDir(dir)
  await sbx.files.write(`${dir}/old.txt`, 'x')
  const seen = []
  const handle = await sbx.files.watchDir(dir, (e) => seen.push(`${e.type}:${e.name}`), { timeoutMs: 0 })
  try {
    await sbx.files.write(`${dir}/new.txt`, 'hello')
    await sbx.files.remove(`${dir}/old.txt`)
    const until = Date.now() + 10_000
    while (Date.now() < until && !(seen.includes('create:new.txt') && seen.includes('remove:old.txt'))) {
      await new Promise((res) => setTimeout(res, 200))
    }
    assert.ok(seen.includes('create:new.txt'), `events ${seen}`)
    assert.ok(seen.includes('remove:old.txt'), `events ${seen}`)
    await sbx.files.write(`${dir}/new.txt`, 'hello again')
    const until2 = Date.now() + 10_000
    while (Date.now() < until2 && !seen.includes('write:new.txt')) await new Promise((res) => setTimeout(res, 200))
    assert.ok(seen.includes('write:new.txt'), `events ${seen}`)
  } finally {
    await handle.stop()
  }
  await assert.rejects(sbx.files.watchDir(`${home}/no-such-dir`, () => {}), /not found|does not exist|no such file/i)
})

test('life: file metadata (envd 0.6.2): write, getInfo, list, rename, overwrite, xattrs (E2B metadata tests)', async () => {
  const md = { author: 'mish', purpose: 'upload' }
  const info = await sbx.files.write(`${home}/md.txt`, 'with metadata', { metadata: md })
  assert.deepEqual(info.metadata, md)
  assert.deepEqual((await sbx.files.getInfo(`${home}/md.txt`)).metadata, md)
  const octet = await sbx.files.write(`${home}/md-octet.txt`, 'octet', { metadata: md, useOctetStream: true })
  assert.deepEqual(octet.metadata, md)
  assert.deepEqual((await sbx.files.getInfo(`${home}/md-octet.txt`)).metadata, md)
  const many = await sbx.files.write([{ path: `${home}/md1.txt`, data: '1' }, { path: `${home}/md2.txt`, data: '2' }], { metadata: { source: 'suite' } })
  for (const f of many) assert.deepEqual((await sbx.files.getInfo(f.path)).metadata, { source: 'suite' })
  const plain = await sbx.files.write(`${home}/plain.txt`, 'none')
  assert.equal(plain.metadata, undefined)
  assert.equal((await sbx.files.getInfo(`${home}/plain.txt`)).metadata, undefined)
  const listed = (await sbx.files.list(home)).find((e) => e.name === 'md.txt')
  assert.deepEqual(listed.metadata, md)
  const moved = await sbx.files.rename(`${home}/md.txt`, `${home}/md-moved.txt`)
  assert.deepEqual(moved.metadata, md)
  // overwriting without metadata clears it
  assert.equal((await sbx.files.write(`${home}/md-moved.txt`, 'again')).metadata, undefined)
  assert.equal((await sbx.files.getInfo(`${home}/md-moved.txt`)).metadata, undefined)
  // an attribute set inside the sandbox in the user.e2b. namespace is metadata
  await sbx.commands.run(`python3 -c "import os; os.setxattr('${home}/plain.txt', 'user.e2b.author', b'cli')"`)
  assert.deepEqual((await sbx.files.getInfo(`${home}/plain.txt`)).metadata, { author: 'cli' })
})

test('life: watchDir includeEntry (envd 0.6.3) carries the entry', async () => {
  const dir = `${home}/watched-entries`
  await sbx.files.makeDir(dir)
  const seen = []
  const handle = await sbx.files.watchDir(dir, (e) => seen.push(e), { includeEntry: true, timeoutMs: 0 })
  try {
    await sbx.files.write(`${dir}/e.txt`, 'entry!', { metadata: { k: 'v' } })
    const until = Date.now() + 10_000
    while (Date.now() < until && !seen.some((e) => e.type === 'create' && e.name === 'e.txt')) await new Promise((res) => setTimeout(res, 200))
    const ev = seen.find((e) => e.type === 'create' && e.name === 'e.txt')
    assert.ok(ev, JSON.stringify(seen))
    assert.equal(ev.entry?.path, `${dir}/e.txt`)
    assert.equal(ev.entry.type, 'file')
    assert.equal(ev.entry.size, 6)
    assert.deepEqual(ev.entry.metadata, { k: 'v' })
  } finally {
    await handle.stop()
  }
})

test('life: watchDir with allowNetworkMounts (envd 0.6.4) watches as without it (E2B watch test)', async () => {
  const dir = `${home}/watched-mounts`
  await sbx.files.makeDir(dir)
  await sbx.files.write(`${dir}/w.txt`, 'before')
  const seen = []
  const handle = await sbx.files.watchDir(dir, (e) => seen.push(`${e.type}:${e.name}`), { allowNetworkMounts: true, timeoutMs: 0 })
  try {
    await sbx.files.write(`${dir}/w.txt`, 'after, longer')
    const until = Date.now() + 10_000
    while (Date.now() < until && !seen.includes('write:w.txt')) await new Promise((res) => setTimeout(res, 100))
    assert.ok(seen.includes('write:w.txt'), `events ${seen}`)
  } finally {
    await handle.stop()
  }
})

test('life: a recursive watch reports a new folder, then the write of a new file in it (E2B watch test)', async () => {
  const dir = `${home}/watched-rec`
  await sbx.files.makeDir(dir)
  const seen = []
  const handle = await sbx.files.watchDir(dir, (e) => seen.push(`${e.type}:${e.name}`), { recursive: true, timeoutMs: 0 })
  const waitFor = async (ev) => {
    const until = Date.now() + 10_000
    while (Date.now() < until && !seen.includes(ev)) await new Promise((res) => setTimeout(res, 100))
    assert.ok(seen.includes(ev), `want ${ev}, events ${seen}`)
  }
  try {
    await sbx.files.makeDir(`${dir}/nested`)
    await waitFor('create:nested')
    await sbx.files.write(`${dir}/nested/new.txt`, 'content')
    // A file that appears with content is created and written, as inotify
    // (and so envd) reports it.
    await waitFor('create:nested/new.txt')
    await waitFor('write:nested/new.txt')
  } finally {
    await handle.stop()
  }
})

test('life: a sandbox created without a timeout gets E2B\'s 5 minutes; connect asking for more extends it (E2B connect test)', async () => {
  const s = await Sandbox.create('base', { metadata: { suite: run } })
  try {
    const before = await s.getInfo()
    const span = before.endAt.getTime() - before.startedAt.getTime()
    assert.ok(Math.abs(span - 300_000) < 2_000, `endAt - startedAt = ${span} ms`)
    await s.connect({ timeoutMs: 600_000 })
    const after = await s.getInfo()
    assert.ok(after.endAt.getTime() > before.endAt.getTime() + 290_000, `before ${before.endAt.toISOString()}, after ${after.endAt.toISOString()}`)
  } finally {
    await s.kill()
  }
})

test('life: file errors name no internal sandbox id (E2B write test, /0/…)', async () => {
  // With root (the image template, where the user has sudo) the user may
  // write anywhere, as on E2B; on the host template the user's permissions hold.
  const denied = await sbx.files.write('/0/sandlot-denied.txt', 'x').then(() => null, (e) => e)
  if (hasRoot) {
    assert.equal(denied, null, `${denied}`)
    assert.equal(await sbx.files.read('/0/sandlot-denied.txt'), 'x')
  } else {
    assert.ok(denied, 'a write to /0 as user succeeded')
    assert.match(denied.message, /permission denied|read-only file system/i)
    assert.doesNotMatch(denied.message, /\bsb-[0-9a-f]/)
  }
  const missing = await sbx.files.read(`${home}/no-such-file`).then(() => null, (e) => e)
  assert.ok(missing, 'reading a missing file succeeded')
  assert.doesNotMatch(missing.message, /\bsb-[0-9a-f]/)
})

test('life: pty create, sendInput, resize, kill', async () => {
  let out = ''
  const dec = new TextDecoder()
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d, { stream: true }) }, timeoutMs: 0 })
  const waitFor = async (re) => {
    const until = Date.now() + 15_000
    while (Date.now() < until && !re.test(out)) await new Promise((res) => setTimeout(res, 100))
    assert.match(out, re)
  }
  const enc = new TextEncoder()
  // The guard holds back the tail of a stream that has no newline yet (the
  // prompt) until more output comes: padding pushes the marks out.
  const pad = "; head -c 4096 /dev/zero | tr '\\0' '.'; echo"
  await sbx.pty.sendInput(pty.pid, enc.encode(`stty size; tty; echo mark-$((6*7))${pad}\n`))
  await waitFor(/mark-42/)
  assert.match(out, /24 80/)
  assert.match(out, /\/dev\/pts\//)
  await sbx.pty.resize(pty.pid, { cols: 120, rows: 40 })
  await sbx.pty.sendInput(pty.pid, enc.encode(`stty size${pad}\n`))
  await waitFor(/40 120/)
  assert.equal(await sbx.pty.kill(pty.pid), true)
  const res = await pty.wait().catch((e) => e)
  assert.notEqual(res.exitCode, 0)
})

test('life: killing a sandbox mid-command says so, without internal ids', async () => {
  const s = await Sandbox.create('base', { metadata: { suite: run } })
  const h = await s.commands.run('sleep 60', { background: true, timeoutMs: 0 })
  await Sandbox.kill(s.sandboxId)
  const err = await h.wait().then(() => null, (e) => e)
  assert.ok(err, 'wait() of a killed sandbox\'s command resolved')
  assert.doesNotMatch(err.message, /\bsb-/)
  // As on E2B (its sandboxKilledDuringRun test): the stream drops, the SDK
  // finds the sandbox gone and says so outright.
  assert.ok(err instanceof TimeoutError, `${err}`)
  assert.match(err.message, /sandbox was killed or reached its end of life/)
})

test('life: pause keeps memory, files and processes; the timeout waits; connect resumes (E2B pause tests)', async () => {
  const tag = { suite: run, pause: String(process.pid) }
  const sb = await CodeSandbox.create({ metadata: tag, timeoutMs: 120_000 })
  try {
    await sb.runCode('kept = 41')
    const h = (await sb.commands.run('echo $HOME')).stdout.trim()
    await sb.files.write(`${h}/before-pause.txt`, 'still here')
    const counter = await sb.commands.run('i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done', { background: true, timeoutMs: 0 })
    await sb.commands.run('sleep 0.3')
    // A short timeout: it must not run out while the sandbox is paused.
    await sb.setTimeout(3_000)
    assert.equal(await sb.pause(), true)
    assert.equal(await sb.pause(), false, 'a second pause is 409: false')
    assert.equal(await sb.isRunning(), false)
    assert.equal((await Sandbox.getInfo(sb.sandboxId)).state, 'paused')
    const ids = async (state) => (await Sandbox.list({ query: { state, metadata: tag } }).nextItems()).map((s) => s.sandboxId)
    assert.deepEqual(await ids(['paused']), [sb.sandboxId])
    assert.deepEqual(await ids(['running']), [])
    assert.deepEqual(await ids(['running', 'paused']), [sb.sandboxId])
    await assert.rejects(sb.runCode('kept'), (e) => e instanceof TimeoutError || e instanceof SandboxError)
    await new Promise((r) => setTimeout(r, 4_000)) // past the timeout set before the pause

    const again = await CodeSandbox.connect(sb.sandboxId, { timeoutMs: 60_000 })
    assert.equal(await again.isRunning(), true)
    const info = await again.getInfo()
    assert.equal(info.state, 'running')
    assert.ok(info.endAt.getTime() - Date.now() > 30_000, `endAt ${info.endAt.toISOString()}: connect's timeout counts from the resume`)
    assert.equal((await again.runCode('kept + 1')).text, '42')
    assert.equal(await again.files.read(`${h}/before-pause.txt`), 'still here')
    assert.ok((await again.commands.list()).some((p) => p.pid === counter.pid), 'the counting process is gone')
    const c1 = Number((await again.commands.run('cat /tmp/count')).stdout)
    await again.commands.run('sleep 0.5')
    const c2 = Number((await again.commands.run('cat /tmp/count')).stdout)
    assert.ok(c2 > c1, `the counter stands at ${c1} then ${c2} after the resume`)
    // connect to a running sandbox: 200, nothing resumed
    await Sandbox.connect(sb.sandboxId)
    assert.equal(await again.commands.kill(counter.pid), true)
  } finally {
    await Sandbox.kill(sb.sandboxId)
  }
  assert.equal(await Sandbox.pause(sb.sandboxId).catch((e) => e.name), 'SandboxNotFoundError')
})

test('life: lifecycle onTimeout pause pauses at the timeout; connect resumes (E2B autoPause)', async () => {
  const sb = await CodeSandbox.create({ metadata: { suite: run }, timeoutMs: 4_000, lifecycle: { onTimeout: 'pause' } })
  try {
    await sb.runCode('auto = "kept"')
    await new Promise((r) => setTimeout(r, 5_000))
    assert.equal((await Sandbox.getInfo(sb.sandboxId)).state, 'paused')
    assert.equal(await sb.isRunning(), false)
    const again = await CodeSandbox.connect(sb.sandboxId, { timeoutMs: 60_000 })
    assert.equal((await again.runCode('auto')).text, 'kept')
  } finally {
    await Sandbox.kill(sb.sandboxId)
  }
  // keepMemory: false suspends to disk at the timeout (state.test.mjs); with autoResume it is refused (the SDK itself refuses it, as E2B does).
  await assert.rejects(CodeSandbox.create({ lifecycle: { onTimeout: { action: 'pause', keepMemory: false }, autoResume: true } }), /keepMemory: false|cannot be combined/)
})

test('life: lifecycle autoResume: the next call to a paused sandbox resumes it and runs (E2B autoResume)', async () => {
  const sb = await CodeSandbox.create({ metadata: { suite: run }, timeoutMs: 4_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  try {
    await sb.runCode('woken = "kept"')
    await new Promise((r) => setTimeout(r, 5_000))
    assert.equal((await Sandbox.getInfo(sb.sandboxId)).state, 'paused')
    // No connect: the call itself wakes the sandbox and waits for it.
    assert.equal((await sb.runCode('woken')).text, 'kept')
    assert.equal((await Sandbox.getInfo(sb.sandboxId)).state, 'running')
    assert.equal((await sb.commands.run('echo up')).stdout, 'up\n')
  } finally {
    await Sandbox.kill(sb.sandboxId)
  }
})
