// The official E2B SDKs against sandlot. Configured only by E2B_API_KEY,
// E2B_API_URL and E2B_SANDBOX_URL; the programs below are plain SDK usage.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox as BaseSandbox, CommandExitError, SandboxError, Template } from 'e2b'
import { Sandbox } from '@e2b/code-interpreter'

const run = `run-${process.pid}-${Date.now()}`
let sbx
let home

before(async () => {
  sbx = await Sandbox.create({ metadata: { suite: run }, timeoutMs: 120_000 })
  home = (await sbx.commands.run('echo $HOME')).stdout.trim()
})

after(async () => {
  if (sbx) await BaseSandbox.kill(sbx.sandboxId)
})

test('control plane: create, getInfo, setTimeout, connect', async () => {
  assert.ok(sbx.sandboxId)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'code-interpreter-v1')
  assert.equal(info.metadata.suite, run)
  assert.equal(info.state, 'running')
  await sbx.setTimeout(300_000)
  const after = await sbx.getInfo()
  assert.ok(after.endAt.getTime() > Date.now() + 200_000, `endAt ${after.endAt} not extended`)
  assert.equal(await sbx.isRunning(), true)
  const again = await BaseSandbox.connect(sbx.sandboxId)
  assert.equal((await again.commands.run('echo connected')).stdout, 'connected\n')
})

test('control plane: v1 create (POST /sandboxes) and kill twice', async () => {
  const res = await fetch(`${process.env.E2B_API_URL}/sandboxes`, {
    method: 'POST',
    headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', metadata: { suite: run, v1: 'yes' } }),
  })
  assert.equal(res.status, 201)
  const body = await res.json()
  assert.ok(body.sandboxID && body.envdVersion && body.clientID && body.envdAccessToken)
  assert.equal(body.templateID, 'base')
  assert.equal(await BaseSandbox.kill(body.sandboxID), true)
  assert.equal(await BaseSandbox.kill(body.sandboxID), false)
})

test('control plane: metadata conversationId/pathId set the identity', async () => {
  // the metadata shown is the caller's own; the identity still filters
  assert.equal((await sbx.getInfo()).metadata.conversationId, undefined)
  const mine = await BaseSandbox.list({ query: { metadata: { conversationId: sbx.sandboxId } } }).nextItems()
  assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId])
  const conv = `conv-${run}`
  const a = await BaseSandbox.create('base', { metadata: { suite: run, conversationId: conv, pathId: 'p1' } })
  try {
    const b = await BaseSandbox.create('base', { metadata: { suite: run, conversationId: conv, pathId: 'p1' } })
    assert.equal(b.sandboxId, a.sandboxId)
    const c = await BaseSandbox.create('base', { metadata: { suite: run, conversationId: conv } })
    assert.notEqual(c.sandboxId, a.sandboxId)
    assert.equal((await c.getInfo()).metadata.pathId, undefined)
    assert.equal((await c.getInfo()).metadata.conversationId, conv)
    await c.kill()
  } finally {
    await a.kill()
  }
})

test('control plane: an unknown template is rejected', async () => {
  for (const create of [() => BaseSandbox.create('nope'), () => Sandbox.create('nope')]) {
    await assert.rejects(create(), (e) => {
      // the SDK reports a failed create as SandboxError("404: <message>")
      assert.ok(e instanceof SandboxError, `got ${e}`)
      assert.match(e.message, /^404: template nope not found/)
      return true
    })
  }
})

test('control plane: list with metadata filter and paging', async () => {
  const extra = await BaseSandbox.create('base', { metadata: { suite: run, page: 'yes' } })
  const extra2 = await BaseSandbox.create('base', { metadata: { suite: run, page: 'yes' } })
  try {
    const seen = new Set()
    const pager = BaseSandbox.list({ query: { metadata: { suite: run } }, limit: 1 })
    let pages = 0
    while (pager.hasNext) {
      const items = await pager.nextItems()
      pages++
      for (const s of items) seen.add(s.sandboxId)
      assert.ok(pages < 10, 'paging does not end')
    }
    assert.ok(seen.has(sbx.sandboxId) && seen.has(extra.sandboxId) && seen.has(extra2.sandboxId))
    assert.ok(pages >= 3, `pages ${pages}`)
    const only = await BaseSandbox.list({ query: { metadata: { page: 'yes', suite: run } } }).nextItems()
    assert.deepEqual(new Set(only.map((s) => s.sandboxId)), new Set([extra.sandboxId, extra2.sandboxId]))
  } finally {
    await extra.kill()
    await extra2.kill()
  }
  await assert.rejects(extra.commands.run('true'))
})

test('commands: output, envs, cwd, streaming callbacks', async () => {
  const out = []
  const err = []
  const r = await sbx.commands.run('echo "$A-$B"; pwd; echo warn >&2', {
    envs: { A: 'one', B: 'two' },
    cwd: '/tmp',
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'one-two\n/tmp\n')
  assert.equal(r.stderr, 'warn\n')
  assert.equal(out.join(''), 'one-two\n/tmp\n')
  assert.equal(err.join(''), 'warn\n')
})

test('envVars given at create reach commands and runCode', async () => {
  const s = await Sandbox.create({ envs: { SANDLOT_E2E_VAR: 'from-create' }, metadata: { suite: run } })
  try {
    assert.equal((await s.commands.run('echo "v=$SANDLOT_E2E_VAR"')).stdout, 'v=from-create\n')
    // per-command envs add to and override the sandbox's
    const r = await s.commands.run('echo "$SANDLOT_E2E_VAR $OTHER"', { envs: { OTHER: 'cmd' } })
    assert.equal(r.stdout, 'from-create cmd\n')
    const e = await s.runCode('import os\nos.environ.get("SANDLOT_E2E_VAR")')
    assert.equal(e.text, 'from-create')
    const js = await s.runCode('process.env.SANDLOT_E2E_VAR', { language: 'javascript' })
    assert.equal(js.text, 'from-create')
  } finally {
    await s.kill()
  }
})

test('commands: nonzero exit throws CommandExitError', async () => {
  await assert.rejects(sbx.commands.run('echo bad >&2; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stderr, 'bad\n')
    return true
  })
})

test('commands: background, list, sendStdin, connect, kill', async () => {
  const h = await sbx.commands.run('read line; echo "got:$line"', { background: true, stdin: true })
  assert.ok(h.pid > 0)
  await sbx.commands.sendStdin(h.pid, 'hello\n')
  const r = await h.wait()
  assert.equal(r.stdout, 'got:hello\n')

  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await cat.sendStdin('via stdin')
  await cat.closeStdin()
  assert.equal((await cat.wait()).stdout, 'via stdin')

  const sleeper = await sbx.commands.run('echo started; sleep 60', { background: true })
  const procs = await sbx.commands.list()
  assert.ok(procs.some((p) => p.pid === sleeper.pid), `pid ${sleeper.pid} not in ${JSON.stringify(procs)}`)
  await sleeper.disconnect()
  const attached = await sbx.commands.connect(sleeper.pid)
  assert.equal(attached.pid, sleeper.pid)
  assert.equal(await sbx.commands.kill(sleeper.pid), true)
  await assert.rejects(attached.wait(), CommandExitError)
  assert.equal(await sbx.commands.kill(sleeper.pid), false)
})

test('templates: Template.exists knows the default templates and no unknown name', async () => {
  assert.equal(await Template.exists('base'), true)
  assert.equal(await Template.exists('code-interpreter-v1'), true)
  assert.equal(await Template.exists(`no-such-template-${process.pid}`), false)
})

test('git: init, status, add, commit, branches through sandbox.git (E2B git tests)', async () => {
  const repo = `${home}/git-${run}`
  await sbx.git.init(repo, { initialBranch: 'main' })
  await sbx.files.write(`${repo}/README.md`, 'hello\n')
  let st = await sbx.git.status(repo)
  assert.equal(st.fileStatus.find((f) => f.name === 'README.md')?.status, 'untracked')
  assert.equal(st.hasUntracked, true)
  await sbx.git.add(repo)
  await sbx.git.commit(repo, 'first', { authorName: 'Sandlot', authorEmail: 'sandlot@example.com' })
  st = await sbx.git.status(repo)
  assert.equal(st.isClean, true)
  await sbx.git.createBranch(repo, 'topic')
  const b = await sbx.git.branches(repo)
  assert.equal(b.currentBranch, 'topic')
  assert.deepEqual([...b.branches].sort(), ['main', 'topic'])
  const log = await sbx.commands.run('git log --format=%an:%s', { cwd: repo })
  assert.equal(log.stdout.trim(), 'Sandlot:first')
})

test('files: write, read, list, exists, makeDir, rename, remove', async () => {
  const dir = `${home}/files-${run}`
  assert.equal(await sbx.files.makeDir(dir), true)
  assert.equal(await sbx.files.makeDir(dir), false)
  const w = await sbx.files.write(`${dir}/a.txt`, 'hello text')
  assert.equal(w.path, `${dir}/a.txt`)
  assert.equal(w.name, 'a.txt')
  assert.equal(await sbx.files.read(`${dir}/a.txt`), 'hello text')
  const bytes = new Uint8Array([0, 1, 2, 250, 255])
  await sbx.files.write(`${dir}/b.bin`, bytes)
  assert.deepEqual(await sbx.files.read(`${dir}/b.bin`, { format: 'bytes' }), bytes)
  const multi = await sbx.files.write([
    { path: `${dir}/m1.txt`, data: 'one' },
    { path: `${dir}/sub/m2.txt`, data: 'two' },
  ])
  assert.equal(multi.length, 2)
  assert.equal(await sbx.files.read(`${dir}/sub/m2.txt`), 'two')
  const names = (await sbx.files.list(dir)).map((e) => `${e.name}:${e.type}`).sort()
  assert.deepEqual(names, ['a.txt:file', 'b.bin:file', 'm1.txt:file', 'sub:dir'])
  assert.equal(await sbx.files.exists(`${dir}/a.txt`), true)
  const info = await sbx.files.getInfo(`${dir}/b.bin`)
  assert.equal(info.name, 'b.bin')
  assert.equal(info.type, 'file')
  assert.equal(info.size, 5)
  const stream = await sbx.files.read(`${dir}/a.txt`, { format: 'stream' })
  assert.equal(await new Response(stream).text(), 'hello text')
  assert.equal(await sbx.files.exists(`${dir}/nope`), false)
  const moved = await sbx.files.rename(`${dir}/a.txt`, `${dir}/c.txt`)
  assert.equal(moved.name, 'c.txt')
  assert.equal(await sbx.files.exists(`${dir}/a.txt`), false)
  assert.equal((await sbx.commands.run(`cat ${dir}/c.txt`)).stdout, 'hello text')
  await sbx.files.remove(`${dir}/sub`)
  assert.equal(await sbx.files.exists(`${dir}/sub/m2.txt`), false)
  await assert.rejects(sbx.files.read(`${dir}/missing.txt`))
})

test('runCode: python state, text, logs, errors', async () => {
  await sbx.runCode('x = 41')
  const e = await sbx.runCode('print("hello")\nx + 1')
  assert.equal(e.text, '42', JSON.stringify({ error: e.error, logs: e.logs }))
  assert.deepEqual(e.logs.stdout, ['hello\n'])
  const bad = await sbx.runCode('1/0')
  assert.equal(bad.error.name, 'ZeroDivisionError')
  assert.ok(bad.error.value.includes('division by zero'))
  assert.ok(bad.error.traceback.length > 0)
  const err = await sbx.runCode('import sys; sys.stderr.write("to stderr\\n")')
  assert.deepEqual(err.logs.stderr, ['to stderr\n'])
})

test('runCode: streaming callbacks, executionCount, typescript and display() (E2B callbacks, executionCount, cwd tests)', async () => {
  const out = [], err = [], results = [], errors = []
  const e = await sbx.runCode('import sys\nprint("a")\nsys.stderr.write("b\\n")\ndisplay("shown")\n7 * 6', {
    onStdout: (m) => out.push(m.line), onStderr: (m) => err.push(m.line),
    onResult: (r) => results.push(r.text), onError: (x) => errors.push(x.name),
  })
  assert.deepEqual(out, ['a\n'])
  assert.deepEqual(err, ['b\n'])
  assert.deepEqual(results, ['shown', '42'])
  assert.deepEqual(e.results.map((r) => [r.text, r.isMainResult]), [['shown', false], ['42', true]])
  await sbx.runCode('raise ValueError("no")', { onError: (x) => errors.push(x.name) })
  assert.deepEqual(errors, ['ValueError'])
  const a = await sbx.runCode('1')
  const b = await sbx.runCode('2')
  assert.equal(b.executionCount, a.executionCount + 1)
  const ts = await sbx.runCode('const n: number = 40; n + 2', { language: 'ts' })
  assert.equal(ts.text, '42')
})

test('runCode: javascript and bash keep state', async () => {
  await sbx.runCode('let y = 20', { language: 'javascript' })
  const js = await sbx.runCode('y + 22', { language: 'javascript' })
  assert.equal(js.text, '42')
  await sbx.runCode('export GREETING=hi', { language: 'bash' })
  const sh = await sbx.runCode('echo "$GREETING there"', { language: 'bash' })
  assert.deepEqual(sh.logs.stdout.join(''), 'hi there\n')
})

test('runCode: a sandbox outlives the manager rotation limit (100 runs)', async () => {
  const s = await Sandbox.create({ metadata: { suite: run } })
  try {
    await s.runCode('n = 0')
    for (let i = 0; i < 110; i++) await s.runCode('n += 1')
    assert.equal((await s.runCode('n')).text, '110')
    assert.equal((await s.commands.run('echo alive')).stdout, 'alive\n')
  } finally {
    await s.kill()
  }
})

test('runCode: matplotlib PNG result', async () => {
  const e = await sbx.runCode(
    'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()',
  )
  assert.equal(e.error, undefined, JSON.stringify(e.error))
  const png = e.results.find((r) => r.png)
  assert.ok(png, `no png in ${JSON.stringify(e.results.map((r) => r.formats()))}`)
  assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
})

test('code contexts: create, isolate, list, restart, remove', async () => {
  const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' })
  assert.ok(ctx.id)
  assert.equal(ctx.cwd, '/tmp')
  const cwd = await sbx.runCode('import os\nos.getcwd()', { context: ctx })
  assert.equal(cwd.text, '/tmp')
  const isolated = await sbx.runCode('x', { context: ctx })
  assert.equal(isolated.error?.name, 'NameError')
  await sbx.runCode('z = 5', { context: ctx })
  assert.equal((await sbx.runCode('z', { context: ctx })).text, '5')
  const list = await sbx.listCodeContexts()
  assert.ok(list.some((c) => c.id === ctx.id))
  await sbx.restartCodeContext(ctx)
  assert.equal((await sbx.runCode('z', { context: ctx })).error?.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  await assert.rejects(sbx.runCode('1', { context: ctx }))
})

test('every sandbox route needs a credential; the SDK sends one', async () => {
  // What the code interpreter SDK sends on /contexts, minus its traffic token.
  const bare = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999', 'Content-Type': 'application/json' }
  for (const [method, path] of [['GET', '/contexts'], ['POST', '/contexts'], ['POST', '/execute']]) {
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}${path}`, {
      method, headers: bare, body: method === 'POST' ? '{"code":"1","language":"python"}' : undefined,
    })
    assert.equal(res.status, 401, `${method} ${path} without a token`)
  }
  // The SDK itself gets through: its traffic token on /contexts.
  assert.ok(Array.isArray(await sbx.listCodeContexts()))
})

test('a timeout above 24 hours is refused', async () => {
  await assert.rejects(BaseSandbox.create('base', { metadata: { suite: run }, timeoutMs: 25 * 3600 * 1000 }), /timeout cannot be greater than 24 hours/)
  await assert.rejects(sbx.setTimeout(25 * 3600 * 1000), /timeout cannot be greater than 24 hours/)
})

// E2E_SECRET is a secret the server's guard redacts, to E2E_REDACTED: the
// in-process harness runs a guard redacting exactly it; against sandlot
// serve it is an AWS key id that the real guard finds.
test('egress guard applies to commands, files and runCode', { skip: !process.env.E2E_SECRET && 'no secret to test the guard with' }, async () => {
  const secret = process.env.E2E_SECRET
  const marker = process.env.E2E_REDACTED || '[REDACTED]'
  const half = secret.slice(0, 8)
  const rest = secret.slice(8)
  // the secret is assembled inside the sandbox, so only the guard can hide it
  const r = await sbx.commands.run(`A=${half}; B=${rest}; echo "key=$A$B"`)
  assert.equal(r.stdout, `key=${marker}\n`)
  const streamed = []
  await sbx.commands.run(`A=${half}; B=${rest}; echo "$A$B"`, { onStdout: (d) => streamed.push(d) })
  assert.equal(streamed.join(''), `${marker}\n`)
  await sbx.commands.run(`A=${half}; B=${rest}; echo "$A$B" > ${home}/secret.txt`)
  assert.equal(await sbx.files.read(`${home}/secret.txt`), `${marker}\n`)
  const e = await sbx.runCode(`print(${JSON.stringify(half)} + ${JSON.stringify(rest)})`)
  // print writes the text and its newline apart (the kernel is unbuffered): a
  // reader that wakes between them, as on a loaded machine, sends two chunks,
  // and the guard emits a redaction as soon as it is whole
  assert.equal(e.logs.stdout.join(''), `${marker}\n`)
  const t = await sbx.runCode(`${JSON.stringify(half)} + ${JSON.stringify(rest)}`)
  assert.equal(t.text, marker)
})

test('timings (reported, not asserted)', async () => {
  const median = async (n, fn) => {
    const ts = []
    for (let i = 0; i < n; i++) {
      const t0 = performance.now()
      await fn()
      ts.push(performance.now() - t0)
    }
    ts.sort((a, b) => a - b)
    return ts[Math.floor(n / 2)].toFixed(1)
  }
  const create = await median(3, async () => {
    const s = await BaseSandbox.create('base', { metadata: { suite: run } })
    await s.kill()
  })
  const cmd = await median(20, () => sbx.commands.run('true'))
  const py = await median(20, () => sbx.runCode('1'))
  const write = await median(20, () => sbx.files.write(`${home}/t.txt`, 'x'))
  console.log(`TIMINGS create+kill=${create}ms commands.run=${cmd}ms runCode(py)=${py}ms files.write=${write}ms`)
})
