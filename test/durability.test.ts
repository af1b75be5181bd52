// Group commit on SQLite: a write is acknowledged only once an fsync of the write-ahead log that
// started after its COMMIT has completed, and commits landing while one fsync runs share the
// next. fsync is held here (a disk that has not answered yet) to watch what waits for it.
// (Acknowledged writes surviving a SIGKILL of the server process: crash.test.ts.)
import { type AtpAgent } from '@atproto/api'
import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest'
import { subscribe } from './firehose-client.js'
import { dialect, describe, newAgent, startTestPds, xrpc, type TestPds } from './harness.js'

const disk = vi.hoisted(() => ({ holding: false, held: [] as (() => void)[] }))

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>()
  const fsync = ((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
    if (disk.holding) disk.held.push(() => fs.fsync(fd, cb))
    else fs.fsync(fd, cb)
  }) as typeof fs.fsync
  return { ...fs, fsync, default: { ...fs, fsync } }
})

/** lets the oldest held fsync run to completion */
const finishOne = () => disk.held.shift()!()
function stopHolding() {
  disk.holding = false
  for (const run of disk.held.splice(0)) run()
}

const COLLECTION = 'com.example.durability'
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function until(cond: () => boolean | Promise<boolean>, what: string) {
  for (let i = 0; i < 200; i++) {
    if (await cond()) return
    await sleep(25)
  }
  throw new Error(`not within 5 s: ${what}`)
}

/** a promise and whether it has settled yet */
function watch<T>(promise: Promise<T>) {
  const w = { promise, settled: false }
  promise.then(
    () => (w.settled = true),
    () => (w.settled = true),
  )
  return w
}

async function walFsyncs(url: string) {
  const text = await (await fetch(`${url}/metrics`)).text()
  return Number(/^pds_db_wal_fsyncs_total (\d+)$/m.exec(text)?.[1])
}

const sqliteOnly = dialect === 'sqlite' ? describe : describe.skip

sqliteOnly('group commit', () => {
  let pds: TestPds
  beforeAll(async () => {
    pds = await startTestPds({ PDS_METRICS: 'true' })
  })
  afterEach(stopHolding)
  afterAll(() => pds?.stop())

  const create = (agent: AtpAgent, rkey: string) =>
    watch(agent.com.atproto.repo.createRecord({ repo: agent.did!, collection: COLLECTION, rkey, record: { rkey } }))
  const readable = async (did: string, rkey: string) =>
    (await xrpc(pds.url, 'com.atproto.repo.getRecord', { params: { repo: did, collection: COLLECTION, rkey } })).status === 200
  const listed = async (did: string) =>
    (await xrpc(pds.url, 'com.atproto.repo.listRecords', { params: { repo: did, collection: COLLECTION, limit: '100' } })).body.records as {
      uri: string
      cid: string
    }[]

  it('acknowledges a write only after an fsync that started after its commit; writes landing meanwhile share the next', async () => {
    const agent = await newAgent(pds.url, 'durable')
    const did = agent.did!
    const before = await walFsyncs(pds.url)
    disk.holding = true

    const first = create(agent, 'first')
    await until(() => disk.held.length === 1, 'the first write fsyncs')
    // committed, so other requests read it, but not acknowledged while its fsync runs
    expect(await readable(did, 'first')).toBe(true)
    expect(first.settled).toBe(false)

    const rest = Array.from({ length: 15 }, (_, i) => create(agent, `rest${i}`))
    await until(async () => (await listed(did)).length === 16, 'all 16 writes commit')
    // the fsync in flight started before these commits: none of them may rely on it
    expect(disk.held.length).toBe(1)
    finishOne()
    await first.promise
    await until(() => disk.held.length === 1, 'the next fsync starts')
    await sleep(100)
    expect(rest.filter((r) => r.settled)).toHaveLength(0)

    finishOne()
    const results = await Promise.all(rest.map((r) => r.promise))
    expect(results.every((r) => r.success)).toBe(true)
    // one fsync for the first write, one shared by the 15 that committed while it ran
    expect((await walFsyncs(pds.url)) - before).toBe(2)
    const byUri = new Map((await listed(did)).map((r) => [r.uri, r.cid]))
    for (const r of [await first.promise, ...results]) expect(byUri.get(r.data.uri)).toBe(r.data.cid)
  })

  it('sends firehose consumers no event before its commit is on disk', async () => {
    const agent = await newAgent(pds.url, 'durablefh')
    // from the log's start: the event may reach the consumer by replay or live, both must wait
    const sub = await subscribe(pds.url, 0)
    try {
      disk.holding = true
      const write = create(agent, 'event')
      await until(() => disk.held.length === 1, 'the write fsyncs')
      await until(() => readable(agent.did!, 'event'), 'the write commits')
      // several poll intervals of the firehose (25 ms) pass with the commit readable
      await sleep(200)
      const commits = () =>
        sub.frames.filter((f) => f.t === '#commit' && f.body.ops?.some((op: { path: string }) => op.path === `${COLLECTION}/event`))
      expect(commits()).toHaveLength(0)
      finishOne()
      await write.promise
      stopHolding()
      await sub.until(() => commits().length === 1)
    } finally {
      sub.close()
    }
  })
})
