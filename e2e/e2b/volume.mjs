// Volumes through the official SDK (run by TestVolumes, in phases around
// a restart of `sandlot serve`).
// a: create a volume, mount it into sandbox A, write a file, refuse to
//    destroy it while A runs, kill A, read the file from sandbox B mounted
//    at another path; refuse mount paths that cover the system; print the
//    volume's id and name and B's id as JSON, B left running.
// b (after the restart): the volume is still there and still in use by
//    B; sandbox C reads the file, and C and B see each other's writes (one
//    file system, not two on one image).
// other (another tenant's key): the volume is not found, by every route,
//    and cannot be mounted.
// end: destroy it; then it is gone.
import assert from 'node:assert/strict'
import { Sandbox, Volume, VolumeNotFoundError } from 'e2b'

const phase = process.argv[2]
if (phase === 'a') {
  const name = 'shared-' + Math.random().toString(36).slice(2, 10)
  const vol = await Volume.create(name)
  assert.equal(vol.name, name)
  assert.ok(vol.volumeId)
  const listed = await Volume.list()
  assert.ok(listed.some((v) => v.volumeId === vol.volumeId && v.name === name), `list: ${JSON.stringify(listed)}`)
  const info = await Volume.getInfo(vol.volumeId)
  assert.equal(info.name, name)

  const a = await Sandbox.create({ volumeMounts: { '/mnt/vol': vol }, timeoutMs: 300_000 })
  const aInfo = await a.getInfo()
  assert.deepEqual(aInfo.volumeMounts, [{ name, path: '/mnt/vol' }])
  await a.commands.run('echo hello from A > /mnt/vol/f.txt && mkdir -p /mnt/vol/sub && ln -s /etc /mnt/vol/sub/etc')
  assert.equal(await a.files.read('/mnt/vol/f.txt'), 'hello from A\n')
  await assert.rejects(Volume.destroy(vol.volumeId), /mounted/, 'destroy while A mounts it')

  for (const bad of ['/proc', '/', '/..', '/dev/x', '/opt/sandlot', '/etc']) {
    await assert.rejects(Sandbox.create({ volumeMounts: { [bad]: name }, timeoutMs: 60_000 }), /mount path/, `mount at ${bad}`)
  }
  await assert.rejects(Sandbox.create({ volumeMounts: { '/data': 'no-such-volume' }, timeoutMs: 60_000 }), /not found/)

  await a.kill()
  const b = await Sandbox.create({ volumeMounts: { '/home/user/data': name }, timeoutMs: 300_000 })
  assert.equal(await b.files.read('/home/user/data/f.txt'), 'hello from A\n')
  const owner = await b.commands.run('stat -c %U /home/user/data/f.txt && touch /home/user/data/by-b')
  assert.equal(owner.stdout, 'user\n')
  // B stays up across the restart, holding the volume.
  console.log(JSON.stringify({ id: vol.volumeId, name, b: b.sandboxId }))
} else if (phase === 'b') {
  const { id, name, b: bID } = JSON.parse(process.argv[3])
  const vol = await Volume.connect(id)
  assert.equal(vol.name, name)
  // B, from before the restart, still mounts it: the new daemon refuses
  // to destroy it too.
  await assert.rejects(Volume.destroy(id), /mounted/, 'destroy while B mounts it, after the restart')
  const c = await Sandbox.create({ volumeMounts: { '/srv/v': vol }, timeoutMs: 300_000 })
  const out = await c.commands.run('cat /srv/v/f.txt && ls /srv/v')
  assert.equal(out.stdout, 'hello from A\nby-b\nf.txt\nlost+found\nsub\n')
  // C and B share one file system (the new daemon found B's loop device):
  // what C writes B reads at once, and the other way round.
  await c.commands.run('echo from C > /srv/v/c.txt')
  const b = await Sandbox.connect(bID)
  assert.equal((await b.commands.run('cat /home/user/data/c.txt')).stdout, 'from C\n')
  await b.commands.run('echo from B > /home/user/data/b.txt')
  assert.equal((await c.commands.run('cat /srv/v/b.txt')).stdout, 'from B\n')
  await b.kill()
  await c.kill()
  console.log('b: ok')
} else if (phase === 'other') {
  const { id, name } = JSON.parse(process.argv[3])
  await assert.rejects(Volume.getInfo(id), VolumeNotFoundError)
  await assert.rejects(Volume.connect(id), VolumeNotFoundError)
  assert.equal(await Volume.destroy(id), false)
  assert.ok(!(await Volume.list()).some((v) => v.volumeId === id))
  for (const ref of [name, id]) {
    await assert.rejects(Sandbox.create({ volumeMounts: { '/data': ref }, timeoutMs: 60_000 }), /not found/)
  }
  console.log('other: ok')
} else if (phase === 'end') {
  const { id } = JSON.parse(process.argv[3])
  assert.equal(await Volume.destroy(id), true)
  await assert.rejects(Volume.getInfo(id), VolumeNotFoundError)
  console.log('end: ok')
}
