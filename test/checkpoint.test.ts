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

  // ~6 MB of log in two calls: each record's text is in its block, its index row and its event
  const writeBatch = async (tag: string) => {
    for (const half of [0, 1]) {
      await agent.com.atproto.repo.applyWrites({
        repo: agent.assertDid,
        writes: Array.from({ length: 100 }, (_, i) => ({
          $type: 'com.atproto.repo.applyWrites#create' as const,
          collection: COLLECTION,
          value: { $type: COLLECTION, text: `${tag} ${half * 100 + i} ${'x'.repeat(6000)}` },
        })),
      })
    }
  }

  it('copies the log into the database file once it passes 4 MiB, though no COMMIT checkpoints', async () => {
    await writeBatch('first')
    expect(statSync(`${dbFile}-wal`).size).toBeGreaterThan(4 * 1024 * 1024)
    await until(() => recordsInMainFile(dbFile) === 200, 'the database file holds the 200 records')
  })

  it('starts the log over instead of letting it grow with every write', async () => {
    const sizes: number[] = []
    let expected = 200
    for (let round = 0; round < 5; round++) {
      await writeBatch(`round ${round}`)
      expected += 200
      await until(() => recordsInMainFile(dbFile) === expected, `round ${round} in the database file`)
      sizes.push(statSync(`${dbFile}-wal`).size)
    }
    // a log that kept every batch would be six times the first one's size by now
    expect(Math.max(...sizes)).toBeLessThan(2 * sizes[0])
    const { data } = await agent.com.atproto.repo.listRecords({ repo: agent.assertDid, collection: COLLECTION, limit: 100 })
    expect(data.records).toHaveLength(100)
    expect(data.records[0].value).toMatchObject({ text: expect.stringMatching(/^round 4 199 x/) })
  })

  it('starts the log over while writes never pause', async () => {
    // back to back for 8 s (~6 MB of log a round): a checkpoint beside the writers never
    // catches up by itself, since they append while it copies
    const started = Date.now()
    let rounds = 0
    while (Date.now() - started < 8000 && rounds < 200) await writeBatch(`steady ${rounds++}`)
    const written = rounds * 6 * 1024 * 1024
    expect(rounds).toBeGreaterThan(4)
    expect(statSync(`${dbFile}-wal`).size).toBeLessThan(written / 2)
    const { data } = await agent.com.atproto.repo.listRecords({ repo: agent.assertDid, collection: COLLECTION, limit: 1 })
    expect(data.records[0].value).toMatchObject({ text: expect.stringMatching(new RegExp(`^steady ${rounds - 1} 199 x`)) })
  })
})

sqliteOnly('the checkpoint worker', () => {
  it('starts when the log is long enough, copies it, and ends when no checkpoint is due', async () => {
    const file = join(tempDir(), 'db.sqlite')
    const db = new SqliteDatabase(file)
    db.pragma('journal_mode = WAL')
    db.pragma('wal_autocheckpoint = 0')
    db.exec('create table t (x text)')
    const c = new Checkpointer(file, () => {}, { thresholdFrames: 50, delayMs: 0, idleCloseMs: 200 })
    c.committed()
    expect(c.running).toBe(false)
    const insert = db.prepare('insert into t values (?)')
    for (let i = 0; i < 100; i++) insert.run('y'.repeat(8000))
    c.committed()
    await until(() => c.running, 'the worker started')
    const copy = join(tempDir(), 'copy.sqlite')
    await until(() => {
      copyFileSync(file, copy)
      const alone = new SqliteDatabase(copy, { readonly: true })
      try {
        return (alone.prepare('select count(*) as n from t').get() as { n: number }).n === 100
      } catch {
        return false
      } finally {
        alone.close()
      }
    }, 'the rows are in the database file')
    await until(() => !c.running, 'the idle worker ended')
    await c.close()
    db.close()
    c.release()
  })

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
