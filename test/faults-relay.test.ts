// A relay down: one in PDS_CRAWLERS refuses connections, another accepts them and never answers.
// Crawl requests run beside the server's work, so writes, their firehose events and the server's
// shutdown go on as if the relays were up; the requests give up after their timeout and retries.
import { createServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { subscribe } from './firehose-client.js'
import { describe, freePort, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { until } from './relay-stand-in.js'

describe('a relay down', () => {
  const held = new Set<Socket>()
  let connections = 0
  const hanging = createServer((s) => {
    connections++
    held.add(s)
    s.on('close', () => held.delete(s))
    s.on('error', () => s.destroy())
  })
  let refusing = ''
  let pds: TestPds | undefined

  beforeAll(async () => {
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r))
    // a port nothing listens on
    refusing = `http://127.0.0.1:${await freePort()}`
  })
  afterAll(async () => {
    await pds?.stop()
    for (const s of held) s.destroy()
    await new Promise((r) => hanging.close(r))
  })

  it('leaves writes, their events and shutdown unaffected when a relay refuses connections or never answers', async () => {
    const hangingUrl = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`
    const timeoutMs = 3000
    pds = await startTestPds(
      { PDS_CRAWLERS: `${refusing},${hangingUrl}` },
      { crawlers: { intervalMs: 200, checkMs: 25, backoffMs: 50, attempts: 2, timeoutMs } },
    )
    // the request at start is waiting on the silent relay while the writes below run
    expect(await until(() => connections >= 1)).toBe(true)
    const acct = await newAccount(pds.url, 'relaydown')
    const fh = await subscribe(pds.url)
    try {
      let slowest = 0
      let rev = ''
      for (let i = 0; i < 20; i++) {
        const t0 = Date.now()
        const r = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
          headers: { authorization: `Bearer ${acct.accessJwt}` },
          body: { repo: acct.did, collection: 'com.example.relaydown', record: { $type: 'com.example.relaydown', i } },
        })
        expect(r.status, r.text).toBe(200)
        slowest = Math.max(slowest, Date.now() - t0)
        rev = r.body.commit.rev
      }
      // no write waited for a crawl request to time out
      expect(slowest).toBeLessThan(timeoutMs)
      await fh.until((f) => f.some((x) => x.t === '#commit' && x.body.rev === rev), 5000)
    } finally {
      fh.close()
    }
    // the silent relay's request timed out and was tried again, bounded
    expect(await until(() => connections >= 2, 4 * timeoutMs)).toBe(true)
    // a crawl request in flight does not hold up the server's stop
    const t0 = Date.now()
    await pds.stop()
    pds = undefined
    expect(Date.now() - t0).toBeLessThan(5000)
  })
})
