// State that outlives a sandbox, through the official SDK: snapshots
// (createSnapshot, listSnapshots, create from one, deleteSnapshot).
// Test names start with "state:" (E2E_FILTER=state:). E2E_SNAPSHOTS=1:
// the server keeps templates in an image store (sandlot serve); the
// in-process server has no image store, where a snapshot is refused.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxError } from 'e2b'

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

test('state: createSnapshot where the server keeps no templates is a clear 412', { skip: snapshots }, async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 60_000 })
  try {
    await assert.rejects(sbx.createSnapshot(), (e) => {
      assert.ok(e.name !== 'SandboxNotFoundError', `got ${e.name}: ${e.message}`)
      assert.match(e.message, /not enabled/)
      return true
    })
  } finally {
    await Sandbox.kill(sbx.sandboxId)
  }
})
