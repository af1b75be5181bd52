import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, startTestPds, xrpc, type TestPds } from './harness.js'
import { seqs, subscribe, type Consumer } from './firehose-client.js'

// The log is read on a timer only once in ten minutes here: whatever reaches the consumers within
// the test's bounds was handed over by the writing process itself when its transaction committed.
describe("the firehose hands this process's commits to its consumers at once", () => {
  let pds: TestPds
  beforeAll(async () => {
    pds = await startTestPds({}, { firehose: { pollMs: 600_000 } })
  })
  afterAll(() => pds?.stop())

  const account = async (i: number) => {
    const res = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: `local${i}x.test`, email: `local${i}@example.com`, password: 'password-1234' },
    })
    expect(res.status).toBe(200)
    return res.body as { did: string; accessJwt: string }
  }
  const createRecord = (acct: { did: string; accessJwt: string }, i: number) =>
    xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: bearer(acct.accessJwt),
      body: { repo: acct.did, collection: 'com.example.local', record: { i } },
    })

  it('each commit reaches ten consumers right after its write is answered, in order', async () => {
    const acct = await account(1)
    const consumers: Consumer[] = []
    for (let i = 0; i < 10; i++) consumers.push(await subscribe(pds.url))
    for (let i = 0; i < 20; i++) {
      const res = await createRecord(acct, i)
      expect(res.status).toBe(200)
      const rev = (res.body as { commit: { rev: string } }).commit.rev
      // bounded well below the timer: only the in-process hand-over can meet it
      for (const c of consumers) await c.until((f) => f.some((x) => x.t === '#commit' && x.body.rev === rev), 2000)
    }
    for (const c of consumers) {
      const got = seqs(c.frames)
      expect(got.length).toBe(20)
      for (let i = 1; i < got.length; i++) expect(got[i]).toBe(got[i - 1] + 1)
      c.close()
    }
  })

  it('concurrent writers on several accounts: every frame once, in seq order, without the timer', async () => {
    const accts = await Promise.all([2, 3, 4, 5, 6, 7, 8, 9].map(account))
    const c = await subscribe(pds.url)
    const res = await Promise.all(accts.flatMap((a) => [0, 1, 2, 3, 4].map((i) => createRecord(a, i))))
    expect(res.every((r) => r.status === 200)).toBe(true)
    await c.until((f) => seqs(f).length >= 40, 2000)
    const got = seqs(c.frames)
    expect(got.length).toBe(40)
    for (let i = 1; i < got.length; i++) expect(got[i]).toBe(got[i - 1] + 1)
    c.close()
  })
})
