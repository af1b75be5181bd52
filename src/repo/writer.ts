// Repository writes. Each write is one transaction: blocks, the new root, the record index, blob
// references, counters and the firehose event commit together or not at all. Writes to one
// repository are serialized by a row lock on its repo_root row (PostgreSQL; it holds across
// processes); SQLite runs one transaction at a time on its single connection.
import type { Keypair } from '@atproto/crypto'
import { BlockMap, Repo, WriteOpAction, type RecordWriteOp } from '@atproto/repo'
import { parseCid, type Cid } from '@atproto/lex-data'
import { sql } from 'kysely'
import type { Db, Dialect } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { k256Keypair } from '../identity/k256.js'
import { appendCommitOrSync, type CommitOp } from './events.js'
import type { PreparedWrite } from './prepare.js'
import { SqlRepoStorage, type Store } from './storage.js'

export type CommitRef = { cid: string; rev: string }
export type WriteResult =
  | { action: 'create' | 'update'; uri: string; cid: string; validationStatus?: string }
  | { action: 'delete'; uri: string }

export async function signingKeyFor(db: Store, did: string): Promise<Keypair> {
  const row = await db.selectFrom('signing_key').select('private_key_hex').where('did', '=', did).executeTakeFirst()
  if (!row) throw xrpcError('InvalidRequest', 'Account has no signing key')
  return k256Keypair(row.private_key_hex)
}

/** the empty signed repository of a fresh account, inside the account's creation transaction */
export async function createEmptyRepo(trx: Store, did: string, keypair: Keypair): Promise<CommitRef> {
  const storage = new SqlRepoStorage(trx, did)
  const commit = await Repo.formatInitCommit(storage, did, keypair)
  await storage.applyCommit(commit)
  const blocks = new BlockMap()
  blocks.addMap(commit.newBlocks)
  await appendCommitOrSync(trx, {
    did,
    rev: commit.rev,
    since: null,
    commit: commit.cid,
    blocks,
    ops: [],
    prevData: null,
  })
  return { cid: commit.cid.toString(), rev: commit.rev }
}

/** locks the repository's root row for the rest of the transaction and returns it */
export async function lockRoot(trx: Store, dialect: Dialect, did: string) {
  let q = trx.selectFrom('repo_root').selectAll().where('did', '=', did)
  if (dialect === 'postgres') q = q.forUpdate()
  return q.executeTakeFirst()
}

export async function writeRecords(
  db: Db,
  did: string,
  writes: PreparedWrite[],
  opts: { swapCommit?: string } = {},
): Promise<{ commit: CommitRef | null; results: WriteResult[] }> {
  return db.transaction().execute(async (trx) => {
    const root = await lockRoot(trx, db.dialect, did)
    if (!root) throw xrpcError('InvalidRequest', `Could not find repo: ${did}`)
    if (opts.swapCommit !== undefined && opts.swapCommit !== root.cid) {
      throw xrpcError('InvalidSwap', `Commit was at ${root.cid}`)
    }

    // current CIDs of the touched records, as the index has them under the lock
    const uris = [...new Set(writes.map((w) => w.uri))]
    const current = new Map<string, string>()
    if (uris.length) {
      const rows = await trx.selectFrom('record').select(['uri', 'cid']).where('uri', 'in', uris).execute()
      for (const r of rows) current.set(r.uri, r.cid)
    }

    const ops: RecordWriteOp[] = []
    const commitOps: CommitOp[] = []
    const results: WriteResult[] = []
    const seen = new Set<string>()
    for (const w of writes) {
      if (seen.has(w.uri)) throw xrpcError('InvalidRequest', `More than one write to ${w.uri}`)
      seen.add(w.uri)
      const prev = current.get(w.uri)
      if (w.swapCid !== undefined && (w.swapCid ?? undefined) !== prev) {
        throw xrpcError('InvalidSwap', prev ? `Record was at ${prev}` : 'Record does not exist')
      }
      const path = `${w.collection}/${w.rkey}`
      if (w.action === 'delete') {
        if (!prev) {
          if (w.ignoreMissing) continue
          throw xrpcError('InvalidRequest', `Could not find record: ${w.uri}`)
        }
        ops.push({ action: WriteOpAction.Delete, collection: w.collection as never, rkey: w.rkey as never })
        commitOps.push({ action: 'delete', path, cid: null, prev: parseCid(prev) })
        results.push({ action: 'delete', uri: w.uri })
        continue
      }
      let action = w.action
      if (action === 'create' && prev) throw xrpcError('InvalidRequest', `Record already exists: ${w.uri}`)
      if (action === 'update' && !prev) {
        if (!w.upsert) throw xrpcError('InvalidRequest', `Could not find record: ${w.uri}`)
        action = 'create'
      }
      if (action === 'create') {
        ops.push({ action: WriteOpAction.Create, collection: w.collection as never, rkey: w.rkey as never, record: w.record })
        commitOps.push({ action: 'create', path, cid: w.cid })
      } else {
        ops.push({ action: WriteOpAction.Update, collection: w.collection as never, rkey: w.rkey as never, record: w.record })
        commitOps.push({ action: 'update', path, cid: w.cid, prev: parseCid(prev!) })
      }
      results.push({ action, uri: w.uri, cid: w.cid.toString(), validationStatus: w.validationStatus })
    }
    if (ops.length === 0) return { commit: null, results }

    // a referenced blob must have been uploaded by this account; it is then permanent
    const blobCids = [...new Set(writes.flatMap((w) => (w.action === 'delete' ? [] : w.blobs)))]
    if (blobCids.length) {
      const have = await trx.selectFrom('blob').select('cid').where('did', '=', did).where('cid', 'in', blobCids).execute()
      const missing = blobCids.filter((c) => !have.some((h) => h.cid === c))
      if (missing.length) throw xrpcError('InvalidRequest', `Could not find blob: ${missing[0]}`)
      await trx.updateTable('blob').set({ referenced: 1 }).where('did', '=', did).where('cid', 'in', blobCids).execute()
    }

    const storage = new SqlRepoStorage(trx, did)
    const repo = await Repo.load(storage, parseCid(root.cid))
    const keypair = await signingKeyFor(trx, did)
    const commit = await repo.formatCommit(ops, keypair)

    // the record index and blob references follow the ops
    const now = new Date().toISOString()
    let recordDelta = 0
    for (const w of writes) {
      const r = results.find((x) => x.uri === w.uri)
      if (!r) continue
      await trx.deleteFrom('record_blob').where('record_uri', '=', w.uri).execute()
      if (r.action === 'delete') {
        await trx.deleteFrom('record').where('uri', '=', w.uri).execute()
        recordDelta--
        continue
      }
      if (w.action === 'delete') continue
      if (r.action === 'create') {
        await trx
          .insertInto('record')
          .values({ uri: w.uri, did, collection: w.collection, rkey: w.rkey, cid: r.cid, rev: commit.rev, indexed_at: now })
          .execute()
        recordDelta++
      } else {
        await trx.updateTable('record').set({ cid: r.cid, rev: commit.rev, indexed_at: now }).where('uri', '=', w.uri).execute()
      }
      if (w.blobs.length) {
        await trx
          .insertInto('record_blob')
          .values(w.blobs.map((b) => ({ did, blob_cid: b, record_uri: w.uri })))
          .execute()
      }
    }

    // a record block another record still points at (identical content) must stay
    const removed = commit.removedCids.toList().map((c) => c.toString())
    if (removed.length) {
      const still = await trx.selectFrom('record').select('cid').where('did', '=', did).where('cid', 'in', removed).execute()
      for (const s of still) commit.removedCids.delete(parseCid(s.cid))
    }
    await storage.applyCommit(commit)
    if (recordDelta) {
      await trx
        .updateTable('repo_root')
        .set({ record_count: sql`record_count + ${recordDelta}` })
        .where('did', '=', did)
        .execute()
    }

    const blocks = new BlockMap()
    blocks.addMap(commit.newBlocks)
    blocks.addMap(commit.relevantBlocks)
    await appendCommitOrSync(trx, {
      did,
      rev: commit.rev,
      since: root.rev,
      commit: commit.cid,
      blocks,
      ops: commitOps,
      prevData: repo.commit.data as Cid,
    })
    return { commit: { cid: commit.cid.toString(), rev: commit.rev }, results }
  })
}
