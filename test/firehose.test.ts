import { afterAll, beforeAll, expect, it } from 'vitest'
import { appendEvent } from '../src/sequencer/index.js'
import { describe, newAccount, startTestPds, type TestPds } from './harness.js'
import { seqs, subscribe } from './firehose-client.js'

const createAccount = (pds: TestPds) => newAccount(pds.url, 'fh')

const dbSeqs = async (pds: TestPds, after = 0) =>
  (await pds.services.db.selectFrom('event').select('seq').where('seq', '>', after).orderBy('seq').execute()).map((r) => r.seq)

describe('the firehose', () => {
  let pds: TestPds
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('streams account creation live as #identity, #account, then #sync of the first commit, in order', async () => {
    const c = await subscribe(pds.url)
    const acct = await createAccount(pds)
    const frames = await c.until((f) => f.filter((x) => x.body.did === acct.did).length >= 3)
    const mine = frames.filter((f) => f.body.did === acct.did)
    expect(mine.map((f) => f.t)).toEqual(['#identity', '#account', '#sync'])
    expect(mine[0].body).toMatchObject({ did: acct.did, handle: acct.handle })
    expect(mine[1].body).toMatchObject({ did: acct.did, active: true })
    expect(mine[1].body.seq).toBeGreaterThan(mine[0].body.seq)
    for (const f of mine) {
      expect(f.op).toBe(1)
      expect(new Date(f.body.time).toISOString()).toBe(f.body.time)
    }
    c.close()
  })

  it('replays from a cursor taken mid-stream while writes go on, with no gap and no duplicate', async () => {
    await createAccount(pds)
    const cursor = (await dbSeqs(pds)).at(-1)!
    const writing = (async () => {
      for (let i = 0; i < 12; i++) await createAccount(pds)
    })()
    await new Promise((r) => setTimeout(r, 30))
    const c = await subscribe(pds.url, cursor)
    await writing
    const expected = await dbSeqs(pds, cursor)
    const frames = await c.until((f) => seqs(f).length >= expected.length)
    await new Promise((r) => setTimeout(r, 100))
    expect(seqs(frames)).toEqual(expected)
    c.close()
  })

  it('answers a cursor from the future with a FutureCursor error frame and closes', async () => {
    const newest = (await dbSeqs(pds)).at(-1) ?? 0
    const c = await subscribe(pds.url, newest + 1000)
    const frames = await c.until((f) => f.length >= 1)
    expect(frames[0]).toMatchObject({ op: -1, body: { error: 'FutureCursor' } })
    await c.closed
  })
})

describe('the firehose across a restart', () => {
  it('loses no acknowledged event', async () => {
    let pds = await startTestPds()
    try {
      const dids: string[] = []
      for (let i = 0; i < 3; i++) dids.push((await createAccount(pds)).did)
      const before = await dbSeqs(pds)
      pds = await pds.restart()
      const c = await subscribe(pds.url, 0)
      const frames = await c.until((f) => seqs(f).length >= before.length)
      expect(seqs(frames)).toEqual(before)
      for (const did of dids) expect(frames.filter((f) => f.body.did === did).map((f) => f.t)).toEqual(['#identity', '#account', '#sync'])
      c.close()
    } finally {
      await pds.stop()
    }
  })
})

describe('firehose back-pressure', () => {
  it('drops a consumer that stops reading with ConsumerTooSlow while a fast one keeps up', async () => {
    const pds = await startTestPds({}, { firehose: { maxBuffer: 50 } })
    try {
      const slow = await subscribe(pds.url)
      const fast = await subscribe(pds.url)
      // the slow one stops reading its socket entirely
      ;(slow.ws as any)._socket.pause()
      const pad = 'x'.repeat(64 * 1024)
      const total = 300
      for (let i = 0; i < total; i++) {
        await appendEvent(pds.services.db, 'identity', `did:plc:slow${i}`, { did: `did:plc:slow${i}`, pad })
        pds.services.firehose.notify()
        // the fast consumer is never more than a few events behind, however loaded the machine
        await fast.until((f) => seqs(f).length >= i - 5, 20_000)
      }
      const got = await fast.until((f) => seqs(f).length >= total, 20_000)
      expect(seqs(got)).toHaveLength(total)
      ;(slow.ws as any)._socket.resume()
      const closed = await slow.closed
      const last = slow.frames.at(-1)
      expect(last).toMatchObject({ op: -1, body: { error: 'ConsumerTooSlow' } })
      expect(seqs(slow.frames).length).toBeLessThan(total)
      expect(closed.code).not.toBe(1000)
      fast.close()
    } finally {
      await pds.stop()
    }
  })
})

describe('firehose retention', () => {
  it('prunes events older than the window, and a cursor before it gets OutdatedCursor then the oldest kept event', async () => {
    const pds = await startTestPds()
    try {
      const db = pds.services.db
      const old = new Date(Date.now() - 100 * 3600_000).toISOString()
      for (let i = 0; i < 5; i++) {
        await db
          .insertInto('event')
          .values({
            type: 'identity',
            did: `did:plc:old${i}`,
            payload: new Uint8Array([0xa1, 0x63, 0x64, 0x69, 0x64, 0x60]),
            sequenced_at: old,
          })
          .execute()
      }
      const acct = await createAccount(pds)
      const all = await dbSeqs(pds)
      const pruned = await pds.services.firehose.prune()
      expect(pruned).toBe(5)
      const kept = await dbSeqs(pds)
      expect(kept).toEqual(all.slice(5))
      const c = await subscribe(pds.url, all[0])
      const frames = await c.until((f) => seqs(f).length >= kept.length)
      expect(frames[0]).toMatchObject({ op: 1, t: '#info', body: { name: 'OutdatedCursor' } })
      expect(seqs(frames)).toEqual(kept)
      expect(frames.filter((f) => f.body.did === acct.did)).toHaveLength(3)
      c.close()
    } finally {
      await pds.stop()
    }
  })
})
