// SQLite's write-ahead log is copied back into the database file by a worker thread, not inside a
// COMMIT on the event loop: the database file alone holds what was written once the worker has
// run, the log starts over instead of growing with every write, and a worker that cannot run
// hands checkpoints back to the writer's connection.
import { copyFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { AtpAgent } from '@atproto/api'
import SqliteDatabase from 'better-sqlite3'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { Checkpointer } from '../src/db/checkpointer.js'
import { dialect, describe, newAgent, startTestPds, tempDir, type TestPds } from './harness.js'

const sqliteOnly = dialect === 'sqlite' ? describe : describe.skip
const COLLECTION = 'com.example.checkpoint'
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** records of COLLECTION the database file holds without its log (a copy opened on its own) */
function recordsInMainFile(dbFile: string): number {
  const copy = join(tempDir(), 'copy.sqlite')
  copyFileSync(dbFile, copy)
  try {
    const db = new SqliteDatabase(copy, { readonly: true })
    try {
      return (db.prepare('select count(*) as n from record where collection = ?').get(COLLECTION) as { n: number }).n
    } finally {
      db.close()
    }
  } catch {
    // copied while the worker wrote pages: not consistent yet
    return -1
  } finally {
    rmSync(copy, { force: true })
  }
}

async function until(cond: () => boolean, what: string) {
  for (let i = 0; i < 100; i++) {
    if (cond()) return
    await sleep(50)
  }
  throw new Error(`not within 5 s: ${what}`)
}

sqliteOnly('WAL checkpoints off the event loop', () => {
  let pds: TestPds
  let agent: AtpAgent
  let dbFile: string
  beforeAll(async () => {
    pds = await startTestPds()
    agent = await newAgent(pds.url, 'ckpt')
    dbFile = join(pds.dataDir, 'pds.sqlite')
  })
  afterAll(() => pds?.stop())

  const writeBatch = (n: number, tag: string) =>
    agent.com.atproto.repo.applyWrites({
      repo: agent.assertDid,
      writes: Array.from({ length: n }, (_, i) => ({
        $type: 'com.atproto.repo.applyWrites#create' as const,
        collection: COLLECTION,
        value: { $type: COLLECTION, text: `${tag} ${i} ${'x'.repeat(2000)}` },
      })),
    })

  it('copies a write into the database file within seconds, though no COMMIT checkpoints', async () => {
    await writeBatch(3, 'first')
    await until(() => recordsInMainFile(dbFile) === 3, 'the database file holds the 3 records')
  })

  it('starts the log over instead of letting it grow with every write', async () => {
    // over 1 MB of log per batch (the record's text is in its block, its index row and its event)
    const sizes: number[] = []
    let expected = 3
    for (let round = 0; round < 8; round++) {
      await writeBatch(100, `round ${round}`)
      expected += 100
      await until(() => recordsInMainFile(dbFile) === expected, `round ${round} in the database file`)
      sizes.push(statSync(`${dbFile}-wal`).size)
    }
    // a log that kept every batch would be eight times the first one's size by now
    expect(Math.max(...sizes)).toBeLessThan(2 * sizes[0])
    const { data } = await agent.com.atproto.repo.listRecords({ repo: agent.assertDid, collection: COLLECTION, limit: 100 })
    expect(data.records).toHaveLength(100)
  })
})

sqliteOnly('checkpoint worker failure', () => {
  it('hands checkpoints back to the writer when the worker cannot open the database', async () => {
    const errors: Error[] = []
    const c = new Checkpointer(join(tempDir(), 'missing', 'pds.sqlite'), (err) => errors.push(err))
    const r = await c.checkpoint()
    expect(r.log).toBe(-1)
    await until(() => errors.length === 1, 'the fallback ran')
    expect(errors[0].message).toMatch(/directory does not exist|unable to open/i)
    // once failed, nothing more is attempted
    c.committed()
    expect((await c.checkpoint()).log).toBe(-1)
    await c.close()
    expect(errors).toHaveLength(1)
  })
})
