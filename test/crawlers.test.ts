import { afterAll, afterEach, expect, it } from 'vitest'
import { describe, startTestPds, xrpc, type TestPds } from './harness.js'
import { StandInRelay, until } from './relay-stand-in.js'

const FAST = { intervalMs: 400, checkMs: 25, backoffMs: 20, attempts: 3 }

describe('crawl requests (PDS_CRAWLERS)', () => {
  const relays: StandInRelay[] = []
  let pds: TestPds | undefined
  afterEach(async () => {
    await pds?.stop()
    pds = undefined
  })
  afterAll(async () => {
    for (const r of relays) await r.stop()
  })
  const relay = async () => {
    const r = await new StandInRelay().start()
    relays.push(r)
    return r
  }

  it('asks every relay to crawl this host name at start', async () => {
    const a = await relay()
    const b = await relay()
    pds = await startTestPds({ PDS_CRAWLERS: `${a.url}, ${b.url}/` }, { crawlers: FAST })
    expect(await until(() => a.calls.length === 1 && b.calls.length === 1)).toBe(true)
    expect(a.calls[0]).toMatchObject({ path: '/xrpc/com.atproto.sync.requestCrawl', body: { hostname: 'localhost' } })
    expect(b.calls[0].path).toBe('/xrpc/com.atproto.sync.requestCrawl')
  })

  it('retries a failing relay with growing backoff, a bounded number of times', async () => {
    const r = await relay()
    r.script = [503, 503, 503, 503, 503]
    // timers never fire early, so lower bounds hold however loaded the machine is: the second wait
    // is at least twice the first backoff (it would be about one backoff without the doubling)
    const backoffMs = 100
    pds = await startTestPds({ PDS_CRAWLERS: r.url }, { crawlers: { ...FAST, backoffMs, intervalMs: 60_000 } })
    expect(await until(() => r.calls.length >= 3)).toBe(true)
    await new Promise((res) => setTimeout(res, 8 * backoffMs))
    expect(r.calls.length).toBe(3)
    const gaps = [r.calls[1].at - r.calls[0].at, r.calls[2].at - r.calls[1].at]
    expect(gaps[0]).toBeGreaterThanOrEqual(backoffMs - 2)
    expect(gaps[1]).toBeGreaterThanOrEqual(2 * backoffMs - 2)
  })

  it('succeeds on a retry after a transient failure', async () => {
    const r = await relay()
    r.script = [502]
    pds = await startTestPds({ PDS_CRAWLERS: r.url }, { crawlers: { ...FAST, intervalMs: 60_000 } })
    expect(await until(() => r.calls.length === 2)).toBe(true)
    await new Promise((res) => setTimeout(res, 200))
    expect(r.calls.length).toBe(2)
  })

  it('asks again on the first write after a quiet period, and not without one', async () => {
    const r = await relay()
    // the quiet period outlasts two account creations (each a password hash) on a loaded machine
    const quiet = { ...FAST, intervalMs: 1500 }
    pds = await startTestPds({ PDS_CRAWLERS: r.url }, { crawlers: quiet })
    expect(await until(() => r.calls.length === 1)).toBe(true)
    // quiet, and no writes: nothing more
    await new Promise((res) => setTimeout(res, quiet.intervalMs * 1.5))
    expect(r.calls.length).toBe(1)
    const res = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'crawled.test', email: 'crawled@example.com', password: 'hunter2hunter2' },
    })
    expect(res.status).toBe(200)
    expect(await until(() => r.calls.length === 2)).toBe(true)
    // more writes inside the quiet period do not ask again
    await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'crawled2.test', email: 'crawled2@example.com', password: 'hunter2hunter2' },
    })
    await new Promise((res) => setTimeout(res, 150))
    expect(r.calls.length).toBe(2)
  })
})
