// The repository as a CAR rooted at the current commit, streamed: the header and the commit block
// go out at once, then the other blocks a page at a time, each page read only once the client has
// taken the previous one (so memory stays flat whatever the repository's size). getRepo
// (optionally only blocks written after a revision) and getCheckout; and the proof of one record
// (sync.getRecord).
import { Readable } from 'node:stream'
import type { Db } from '../db/index.js'
import { sql } from 'kysely'
import { orderedPages } from '../db/ordered-pages.js'
import { dialectOf, hexOf } from '../db/dialect.js'
import { prepared } from '../db/prepared.js'
import type { Store } from '../db/schema.js'
import type { Snapshot } from '../db/snapshot.js'
import { getRecords } from '@atproto/repo'
import { parseCid } from '@atproto/lex-data'
import { xrpcError } from '../errors.js'
import { CarWriter } from '../encoding/car.js'
import { SqlRepoStorage } from './storage.js'
import { concat } from './util.js'
import { syncRepo } from './read.js'

// pages in key order, each one short-lived: the whole repository's rows held at once outlive
// the young generation and are collected as old objects
const PAGE = 1000
/** a client that takes nothing for this long loses the connection (and its snapshot is let go) */
const STALL_MS = 60_000

const hexContent = (db: Store) => sql.raw<string>(hexOf(dialectOf(db), 'content')).as('hex')

const selectCommitBlock = prepared((db, did: string, cid: string) =>
  db
    .selectFrom('repo_block')
    .select(['repo_rev', hexContent(db)])
    .where('did', '=', did)
    .where('cid', '=', cid),
)

/**
 * The CAR as a stream; throws the sync reads' status errors before anything is sent. Everything
 * is read in one snapshot (db/snapshot.ts), so the root and every block come from one state of
 * the repository however long the client takes, and writers are not held up meanwhile. An error
 * once bytes are out destroys the stream (the connection is cut: a truncated CAR shows as one).
 */
export async function repoCarStream(db: Db, did: string, opts: { since?: string; allowDeactivated?: boolean } = {}): Promise<Readable> {
  return (await repoCar(db, did, opts)).stream
}

/** the CAR stream and the repository root it was read at (commit CID, rev, record count) */
export async function repoCar(
  db: Db,
  did: string,
  opts: { since?: string; allowDeactivated?: boolean } = {},
): Promise<{ stream: Readable; root: { cid: string; rev: string; record_count: number } }> {
  const snap = await db.snapshot()
  let root: { cid: string; rev: string; record_count: number }
  let commit: { repo_rev: string; hex: string } | undefined
  try {
    ;({ root } = await syncRepo(snap.store, did, { allowDeactivated: opts.allowDeactivated }))
    ;[commit] = await selectCommitBlock(snap.store, did, root.cid)
  } catch (err) {
    await snap.end()
    throw err
  }
  return { stream: exportStream(snap, did, root.cid, opts.since, commit), root }
}

function exportStream(snap: Snapshot, did: string, root: string, since: string | undefined, commit?: { repo_rev: string; hex: string }) {
  const car = new CarWriter(root)
  if (commit && (since === undefined || commit.repo_rev > since)) car.add(root, commit.hex)
  let ready: Buffer[] = car.take(true)
  let done = false
  const blocks = snap.store
    .selectFrom('repo_block')
    .select(['cid', hexContent(snap.store)])
    .where('did', '=', did)
  const page = orderedPages(snap.store, {
    select: since !== undefined ? blocks.where('repo_rev', '>', since) : blocks,
    key: 'cid',
    pageSize: PAGE,
    cursorName: 'repo_car',
  })

  /** the next chunks, or null at the end */
  async function next(): Promise<Buffer[] | null> {
    while (!ready.length) {
      if (done || stream.destroyed) return null
      const rows = await page()
      // the commit went out first
      for (const row of rows) if (row.cid !== root) car.add(row.cid, row.hex)
      if (rows.length < PAGE) {
        done = true
        ready = car.end()
        await snap.end()
      } else {
        ready = car.take()
      }
    }
    const out = ready
    ready = []
    return out
  }

  let stall: NodeJS.Timeout | undefined
  const stream = new Readable({
    // write() returning false pauses the pipe and no read() comes until 'drain': then no page is read
    read() {
      clearTimeout(stall)
      next().then(
        (chunks) => {
          if (!chunks) return void stream.push(null)
          for (const c of chunks) stream.push(c)
          stall = setTimeout(() => stream.destroy(new Error('getRepo: the client stopped reading')), STALL_MS)
          stall.unref()
        },
        (err) => stream.destroy(err),
      )
    },
    destroy(err, cb) {
      clearTimeout(stall)
      snap.end().then(() => cb(err), cb)
    },
  })
  return stream
}

/**
 * sync.getRecord: a CAR proving the record's presence (or absence) under the current commit: the
 * commit, the MST path and the record block. A taken-down record is RecordNotFound.
 */
export async function recordProofCar(db: Db, did: string, path: { collection: string; rkey: string }): Promise<Uint8Array> {
  return db.transact(async (trx) => {
    const { root } = await syncRepo(trx, did)
    const uri = `at://${did}/${path.collection}/${path.rkey}`
    const row = await trx.selectFrom('record').select('takedown_ref').where('uri', '=', uri).executeTakeFirst()
    if (row && row.takedown_ref !== null) throw xrpcError('RecordNotFound', `Could not locate record: ${uri}`)
    return concat(getRecords(new SqlRepoStorage(trx, did), parseCid(root.cid), [path]))
  })
}
