// @e2b/desktop's Sandbox.create() of a cold desktop (no warm pool), then
// its first screenshot at once, written to $SHOT for the Go test to read
// (run by TestDesktopSDKColdDrawn in e2e/desktop): the create returns
// when the screen shows the desktop, not the X server's black screen.
import fs from 'node:fs'
import { Sandbox } from '@e2b/desktop'

const t0 = Date.now()
const desk = await Sandbox.create({ timeoutMs: 600_000 })
const createMs = Date.now() - t0
console.log(`sandbox ${desk.sandboxId}`)
const shot = await desk.screenshot()
const shotMs = Date.now() - t0
fs.writeFileSync(process.env.SHOT, Buffer.from(shot))
console.log(`figures ${JSON.stringify({ createMs, firstScreenshotMs: shotMs })}`)
await desk.kill()
console.log('ok')
