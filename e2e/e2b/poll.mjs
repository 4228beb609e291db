// poll runs fn until it returns a truthy value or the time is up: the
// desktop scripts' wait for something a sandbox starts in the background.
export async function poll (what, fn, ms = 30_000) {
  const end = Date.now() + ms
  let last
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last } catch (e) { last = e }
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error(`${what}: gave up (${last})`)
}
