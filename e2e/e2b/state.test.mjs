// State that outlives a sandbox, through the official SDK: snapshots
// (createSnapshot, listSnapshots, create from one, deleteSnapshot).
// pause({keepMemory: false}) and connect (suspend to disk).
// Test names start with "state:" (E2E_FILTER=state:). E2E_SNAPSHOTS=1:
// the server keeps templates in an image store (sandlot serve); the
// in-process server has no image store, where a snapshot is refused.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxError } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const snapshots = process.env.E2E_SNAPSHOTS === '1'

test('state: createSnapshot, a sandbox from it, list and delete', { skip: !snapshots }, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
  try {
    await sbx.files.write('/home/user/kept.txt', 'from the snapshot')
    await sbx.commands.run('mkdir -p /home/user/d && echo nested > /home/user/d/n.txt && ln -s /etc/shadow /home/user/shadow')
    const snap = await sbx.createSnapshot({ name: `snap-${process.pid}` })
    assert.ok(snap.snapshotId, JSON.stringify(snap))
    assert.deepEqual(snap.names, [`snap-${process.pid}`])
    const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
    assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId])
    // The source runs on, its files as they were.
    assert.equal((await sbx.commands.run('cat /home/user/kept.txt')).stdout, 'from the snapshot')

    const from = await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 })
    try {
      assert.notEqual(from.sandboxId, sbx.sandboxId)
      assert.equal(await from.files.read('/home/user/kept.txt'), 'from the snapshot')
      assert.equal(await from.files.read('/home/user/d/n.txt'), 'nested\n')
      assert.equal((await from.commands.run('readlink /home/user/shadow')).stdout, '/etc/shadow\n')
    } finally {
      await Sandbox.kill(from.sandboxId)
    }
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
    assert.deepEqual(await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems(), [])
  } finally {
    await Sandbox.kill(sbx.sandboxId)
  }
})

test('state: createSnapshot of an unknown sandbox is SandboxNotFound', async () => {
  await assert.rejects(Sandbox.createSnapshot('nosuchsandbox'), (err) => err instanceof SandboxError && /not found/i.test(err.message))
})

test('state: createSnapshot and fork where the server keeps no templates are a clear 412', { skip: snapshots }, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 60_000 })
  try {
    for (const call of [() => sbx.createSnapshot(), () => Sandbox.fork(sbx.sandboxId, { count: 2 })]) {
      await assert.rejects(call(), (e) => {
        assert.ok(e.name !== 'SandboxNotFoundError', `got ${e.name}: ${e.message}`)
        assert.match(e.message, /not enabled/)
        return true
      })
    }
  } finally {
    await Sandbox.kill(sbx.sandboxId)
  }
})

test('state: fork with count 2 copies the files, each fork its own, the source running on', { skip: !snapshots }, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 })
  const forks = []
  try {
    await sbx.files.write('/home/user/branch.txt', 'before the fork')
    await sbx.commands.run('python3 -c "print(1)"')
    const got = await Sandbox.fork(sbx.sandboxId, { count: 2, timeoutMs: 120_000 })
    assert.equal(got.length, 2)
    for (const f of got) {
      assert.ok(f instanceof Sandbox, `a fork failed: ${f}`)
      forks.push(f)
    }
    assert.notEqual(forks[0].sandboxId, forks[1].sandboxId)
    await forks[0].files.write('/home/user/branch.txt', 'fork 0 wrote this')
    assert.equal(await forks[1].files.read('/home/user/branch.txt'), 'before the fork')
    assert.equal(await forks[0].files.read('/home/user/branch.txt'), 'fork 0 wrote this')
    assert.equal(await sbx.files.read('/home/user/branch.txt'), 'before the fork')
    // The source runs on.
    assert.equal((await sbx.commands.run('echo alive')).stdout, 'alive\n')
  } finally {
    for (const f of forks) await Sandbox.kill(f.sandboxId)
    await Sandbox.kill(sbx.sandboxId)
    for (const s of await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()) await Sandbox.deleteSnapshot(s.snapshotId)
  }
})

test('state: pause({keepMemory: false}) suspends to disk; connect boots it again with its files, its kernels and processes fresh', { skip: !snapshots }, async () => {
  const sbx = await CodeSandbox.create({ timeoutMs: 120_000 })
  try {
    await sbx.files.write('/home/user/kept.txt', 'through the suspend')
    await sbx.runCode('x = 41')
    await sbx.commands.run('sleep 600', { background: true })
    assert.equal(await sbx.pause({ keepMemory: false }), true)
    assert.equal(await sbx.pause({ keepMemory: false }), false, 'a second pause is 409: false')
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')

    const again = await CodeSandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
    assert.equal(again.sandboxId, sbx.sandboxId)
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'running')
    assert.equal(await again.files.read('/home/user/kept.txt'), 'through the suspend')
    const gone = await again.runCode('x')
    assert.equal(gone.error?.name, 'NameError', JSON.stringify(gone))
    const procs = await again.commands.list()
    assert.ok(!procs.some((p) => [p.cmd, ...(p.args ?? [])].join(' ').includes('sleep 600')), JSON.stringify(procs))

    // onResume 'reboot' on a sandbox paused with its memory: the memory
    // is dropped, the files kept.
    await again.runCode('y = 1')
    await again.files.write('/home/user/second.txt', 'after the reboot')
    assert.equal(await again.pause(), true)
    const rebooted = await CodeSandbox.connect(sbx.sandboxId, { timeoutMs: 120_000, onResume: 'reboot' })
    assert.equal(await rebooted.files.read('/home/user/second.txt'), 'after the reboot')
    assert.equal(await rebooted.files.read('/home/user/kept.txt'), 'through the suspend', 'the files from before the first suspend')
    assert.equal((await rebooted.runCode('y')).error?.name, 'NameError')
  } finally {
    await Sandbox.kill(sbx.sandboxId)
  }
})

test('state: lifecycle onTimeout pause without memory suspends to disk at the timeout; connect boots it with its files', { skip: !snapshots }, async () => {
  const sbx = await CodeSandbox.create({ timeoutMs: 4_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  try {
    await sbx.files.write('/home/user/kept.txt', 'through the timeout')
    await sbx.runCode('x = 41')
    let state = ''
    for (let i = 0; i < 120 && state !== 'paused'; i++) {
      await new Promise((r) => setTimeout(r, 500))
      state = (await Sandbox.getInfo(sbx.sandboxId)).state
    }
    assert.equal(state, 'paused')
    assert.equal(await sbx.isRunning(), false, 'held as a pause: traffic does not wake it')
    const again = await CodeSandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
    assert.equal(await again.files.read('/home/user/kept.txt'), 'through the timeout')
    assert.equal((await again.runCode('x')).error?.name, 'NameError')
  } finally {
    await Sandbox.kill(sbx.sandboxId)
  }
})
