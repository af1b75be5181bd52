import { readCarWithRoot, verifyRepoCar } from '@atproto/repo'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'

// getRepo of a 20,000-record repository, streamed: the first bytes come while the rest is still
// being read, from one snapshot that writes made meanwhile do not change and do not wait for.
describe('getRepo streams a large repository', () => {
  let pds: TestPds
  let acct: Awaited<ReturnType<typeof newAccount>>
  const RECORDS = 20_000

  beforeAll(async () => {
    pds = await startTestPds()
    acct = await newAccount(pds.url, 'export')
    for (let n = 0; n < RECORDS; n += 200) {
      const writes = Array.from({ length: 200 }, (_, i) => ({
        $type: 'com.atproto.repo.applyWrites#create',
        collection: 'com.example.big',
        rkey: `r${String(n + i).padStart(6, '0')}`,
        value: { i: n + i, text: 'x'.repeat(500) },
      }))
      const res = await xrpc(pds.url, 'com.atproto.repo.applyWrites', { headers: bearer(acct.accessJwt), body: { repo: acct.did, writes } })
      expect(res.status).toBe(200)
    }
  }, 300_000)
  afterAll(() => pds?.stop())

  const signingKey = async () => {
    const doc = (await xrpc(pds.url, 'com.atproto.identity.resolveDid', { params: { did: acct.did } })).body.didDoc
    return 'did:key:' + doc.verificationMethod[0].publicKeyMultibase
  }

  it('reads the repository only as fast as the client takes it, the commit block first', async () => {
    // count the pages the export reads from its snapshot
    const db = pds.services.db
    const snapshot = db.snapshot.bind(db)
    let reads = 0
    db.snapshot = async () => {
      const snap = await snapshot()
      const run = snap.store.executeQuery.bind(snap.store)
      snap.store.executeQuery = ((q: any) => (reads++, run(q))) as typeof run
      return snap
    }
    try {
      const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${acct.did}`)
      expect(res.status).toBe(200)
      const reader = res.body!.getReader()
      const chunks: Uint8Array[] = [(await reader.read()).value!]
      // the client stops reading: once the socket's buffers are full the server stops too
      let last = -1
      for (let i = 0; i < 100 && reads !== last; i++) {
        last = reads
        await new Promise((r) => setTimeout(r, 50))
      }
      const whilePaused = reads
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        chunks.push(value)
      }
      // pages of 1,000 blocks, 20,000 records and their tree: 20 and more pages in all
      expect(reads).toBeGreaterThan(20)
      expect(whilePaused).toBeLessThan(reads / 2)
      const car = Buffer.concat(chunks)
      const { root, blocks } = await readCarWithRoot(car)
      expect(blocks.size).toBeGreaterThan(RECORDS)
      // the header, then the commit: varint(length) || CID || bytes
      let at = car[0] + 1
      while (car[at] & 0x80) at++
      const first = car.subarray(at + 1, at + 1 + root.bytes.length)
      expect(Buffer.from(first).equals(Buffer.from(root.bytes))).toBe(true)
      const verified = await verifyRepoCar(car, acct.did, await signingKey())
      expect(verified.creates.length).toBe(RECORDS)
    } finally {
      db.snapshot = snapshot
    }
  }, 120_000)

  it('writes go through while a client holds an export, which stays one consistent snapshot', async () => {
    const before = (await xrpc(pds.url, 'com.atproto.sync.getLatestCommit', { params: { did: acct.did } })).body
    const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${acct.did}`)
    const reader = res.body!.getReader()
    const chunks: Uint8Array[] = [(await reader.read()).value!]
    // the client reads nothing more for now: a write is answered meanwhile
    const write = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: bearer(acct.accessJwt),
      body: { repo: acct.did, collection: 'com.example.big', rkey: 'during', record: { i: -1 } },
    })
    expect(write.status).toBe(200)
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      chunks.push(value)
    }
    const car = Buffer.concat(chunks)
    const { root } = await readCarWithRoot(car)
    expect(root.toString()).toBe(before.cid)
    const verified = await verifyRepoCar(car, acct.did, await signingKey())
    expect(verified.creates.length).toBe(RECORDS)
    expect(verified.creates.some((c) => c.rkey === 'during')).toBe(false)
  }, 120_000)
})
