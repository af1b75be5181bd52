// What one client can make the firehose do to everyone else: how many streams it may hold, what
// a crowd of full replays costs other requests, and what a consumer that stops reading costs.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, expect, it } from 'vitest'
import WebSocket from 'ws'
import { appendEvent } from '../src/sequencer/index.js'
import { describe, startTestPds, type TestPds } from './harness.js'
import { seqs, subscribe } from './firehose-client.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const streamUrl = (pds: TestPds, qs = '') => `${pds.url.replace(/^http/, 'ws')}/xrpc/com.atproto.sync.subscribeRepos${qs}`

/** how the server answered an upgrade: opened, or refused with an HTTP status and body */
function attempt(url: string): Promise<{ ws?: WebSocket; status?: number; body?: any }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url)
    const timer = setTimeout(() => reject(new Error('no answer to the upgrade within 10 s')), 10_000)
    ws.once('open', () => {
      clearTimeout(timer)
      resolve({ ws })
    })
    ws.once('unexpected-response', (_req, res) => {
      let text = ''
      res.on('data', (c) => (text += c))
      res.on('end', () => {
        clearTimeout(timer)
        resolve({ status: res.statusCode, body: JSON.parse(text) })
      })
    })
    ws.once('error', () => {})
  })
}

const until = async (pred: () => boolean, ms: number, what: string) => {
  const end = Date.now() + ms
  while (!pred()) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('firehose admission', () => {
  let pds: TestPds
  beforeAll(async () => {
    pds = await startTestPds({ PDS_FIREHOSE_CONNECTIONS_PER_ADDRESS: '3' })
  })
  afterAll(() => pds?.stop())

  it('refuses a cursor that is not a non-negative integer with 400 InvalidRequest instead of replaying from 0', async () => {
    for (const bad of ['abc', '-1', '1.5', '1e3', '0x10', '99999999999999999999', '1&cursor=2']) {
      const res = await attempt(streamUrl(pds, `?cursor=${bad}`))
      res.ws?.terminate()
      expect({ bad, status: res.status, error: res.body?.error }).toEqual({ bad, status: 400, error: 'InvalidRequest' })
    }
    const ok = await subscribe(pds.url, 0)
    ok.close()
  })

  it('holds one client address to its share of streams (429) and frees a place when one closes', async () => {
    const open = await Promise.all([0, 1, 2].map(() => attempt(streamUrl(pds))))
    expect(open.map((o) => !!o.ws)).toEqual([true, true, true])
    const refused = await attempt(streamUrl(pds))
    refused.ws?.terminate()
    expect(refused).toMatchObject({ status: 429, body: { error: 'RateLimitExceeded' } })
    const first = open[0].ws!
    first.close()
    await new Promise((r) => first.once('close', r))
    // the server learns of the close a moment later
    let again: Awaited<ReturnType<typeof attempt>> = {}
    for (let i = 0; i < 50 && !again.ws; i++) {
      again = await attempt(streamUrl(pds))
      if (!again.ws) await new Promise((r) => setTimeout(r, 20))
    }
    expect(again.ws).toBeDefined()
    for (const o of [...open, again]) o.ws?.terminate()
  })
})

describe('firehose replays under load', () => {
  it('keeps /xrpc/_health answering within a second while 150 clients replay the whole log without reading', async () => {
    const pds = await startTestPds({ PDS_FIREHOSE_CONNECTIONS_PER_ADDRESS: '1000' })
    const pad = 'x'.repeat(2000)
    await pds.services.db.transact(async (tx) => {
      for (let i = 0; i < 2000; i++) await appendEvent(tx, 'identity', `did:plc:flood${i}`, { did: `did:plc:flood${i}`, pad })
    })
    // the consumers live in another process, so the server's event loop is all this one measures
    const crowd = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import WebSocket from 'ws'
         for (let i = 0; i < 150; i++) {
           const ws = new WebSocket(process.argv[1])
           ws.on('open', () => ws._socket.pause())
           ws.on('error', () => {})
         }
         setTimeout(() => process.exit(0), 20_000)`,
        streamUrl(pds, '?cursor=0'),
      ],
      { cwd: ROOT, stdio: 'ignore' },
    )
    try {
      const latencies: number[] = []
      const end = Date.now() + 6000
      while (Date.now() < end) {
        const t = Date.now()
        const res = await fetch(`${pds.url}/xrpc/_health`, { signal: AbortSignal.timeout(15_000) })
        expect(res.status).toBe(200)
        await res.text()
        latencies.push(Date.now() - t)
        await new Promise((r) => setTimeout(r, 50))
      }
      expect(Math.max(...latencies)).toBeLessThan(1000)
      expect(pds.services.firehose.stats().consumers).toBeGreaterThan(100)
    } finally {
      crowd.kill()
      await pds.stop()
    }
  })
})

describe('firehose slow consumers', () => {
  it('cuts off a consumer that stops reading once its unsent bytes pass the limit, while another gets every event', async () => {
    const pds = await startTestPds({}, { firehose: { maxBacklogBytes: 512 * 1024 } })
    try {
      const slow = await subscribe(pds.url)
      const fast = await subscribe(pds.url)
      ;(slow.ws as any)._socket.pause()
      await until(() => pds.services.firehose.stats().consumers === 2, 5000, 'both consumers live')
      const pad = 'x'.repeat(64 * 1024)
      let total = 0
      // the kernel's socket buffers take some megabytes first; the server's own backlog past that
      // is what the limit bounds
      while (pds.services.firehose.stats().consumers === 2) {
        if (total >= 600) throw new Error('the paused consumer was never cut off')
        total++
        await appendEvent(pds.services.db, 'identity', `did:plc:slow${total}`, { did: `did:plc:slow${total}`, pad })
        pds.services.firehose.notify()
        await fast.until((f) => seqs(f).length >= total, 20_000)
      }
      // the server let go while the consumer still was not reading; once it reads, the last
      // thing it finds is why
      ;(slow.ws as any)._socket.resume()
      const closed = await Promise.race([
        slow.closed,
        new Promise<never>((_, j) => setTimeout(() => j(new Error('slow consumer not closed')), 20_000)),
      ])
      expect(slow.frames.at(-1)).toMatchObject({ op: -1, body: { error: 'ConsumerTooSlow' } })
      expect(closed.code).toBe(1008)
      expect(seqs(slow.frames).length).toBeLessThan(total)
      for (let i = 0; i < 5; i++) {
        total++
        await appendEvent(pds.services.db, 'identity', `did:plc:after${i}`, { did: `did:plc:after${i}` })
        pds.services.firehose.notify()
      }
      const got = await fast.until((f) => seqs(f).length >= total, 20_000)
      expect(seqs(got)).toEqual(Array.from({ length: total }, (_, i) => seqs(got)[0] + i))
      fast.close()
    } finally {
      await pds.stop()
    }
  })
})
