// Repository writes. Each write is one transaction: blocks, the new root, the record index, blob
// references, counters and the firehose event commit together or not at all. Writes to one
// repository are serialized by a row lock on its repo_root row (PostgreSQL; it holds across
// processes); SQLite runs one transaction at a time on its single connection.
import type { Keypair } from '@atproto/crypto'
import { BlockMap, def, ensureV3Commit, MST, Repo } from '@atproto/repo'
import { parseCid } from '@atproto/lex-data'
import type { Db, Tx } from '../db/index.js'
import { dialectOf, lockingRead, type Dialect } from '../db/dialect.js'
import { bulkInsert } from '../db/bulk-insert.js'
import { prepared, preparedChange, preparedIn, preparedInChange } from '../db/prepared.js'
import { xrpcError } from '../errors.js'
import { k256Keypair } from '../identity/k256.js'
import { buildCommit, type RepoHead, type TreeOp } from './commit.js'
import { appendCommitOrSync, appendSyncEvent, type CommitOp } from './events.js'
import type { PreparedWrite } from './prepare.js'
import { SqlRepoStorage, type RecordRefs } from './storage.js'
import type { Store } from '../db/schema.js'
import { putTree, takeTree } from './tree-cache.js'
import { recordValueJson } from './record-json.js'

export type CommitRef = { cid: string; rev: string }
export type WriteResult =
  { action: 'create' | 'update'; uri: string; cid: string; validationStatus?: string } | { action: 'delete'; uri: string }

const selectSigningKey = prepared((db, did: string) => db.selectFrom('signing_key').select('private_key_hex').where('did', '=', did))

export async function signingKeyFor(db: Store, did: string): Promise<Keypair> {
  const [row] = await selectSigningKey(db, did)
  if (!row) throw xrpcError('InvalidRequest', 'Account has no signing key')
  return k256Keypair(row.private_key_hex)
}

/**
 * the empty signed repository of a fresh account, inside the account's creation transaction: its
 * `#commit`, then a `#sync` a relay can start the account from
 */
export async function createEmptyRepo(trx: Tx, did: string, keypair: Keypair): Promise<CommitRef> {
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
  await appendSyncEvent(trx, did, commit.rev, commit.cid, commit.newBlocks.get(commit.cid)!)
  return { cid: commit.cid.toString(), rev: commit.rev }
}

// URIs per IN list: well under SQLite's and PostgreSQL's bind limits
const CHUNK = 500

const RECORD_COLUMNS = ['uri', 'did', 'collection', 'rkey', 'cid', 'rev', 'indexed_at', 'value_json'] as const
const RECORD_BLOB_COLUMNS = ['did', 'blob_cid', 'record_uri'] as const

const updateRecord = preparedChange((db, uri: string, cid: string, rev: string, at: string, json: string) =>
  db.updateTable('record').set({ cid, rev, indexed_at: at, value_json: json }).where('uri', '=', uri),
)
const deleteRecordBlobs = preparedInChange((db, uris: string[]) => db.deleteFrom('record_blob').where('record_uri', 'in', uris))
const deleteRecords = preparedInChange((db, uris: string[]) => db.deleteFrom('record').where('uri', 'in', uris))
const selectRecordCids = preparedIn((db, uris: string[]) => db.selectFrom('record').select(['uri', 'cid']).where('uri', 'in', uris))
const countRecords = preparedChange((db, did: string, delta: number) =>
  db
    .updateTable('repo_root')
    .set((eb) => ({ record_count: eb('record_count', '+', delta) }))
    .where('did', '=', did),
)

/** the record and record_blob rows after `results`; returns the change in the number of records */
async function indexRecords(trx: Store, dialect: Dialect, did: string, writes: PreparedWrite[], results: WriteResult[], rev: string) {
  const now = new Date().toISOString()
  const byUri = new Map(writes.map((w) => [w.uri, w]))
  const created: unknown[] = []
  const deleted: string[] = []
  const blobs: unknown[] = []
  for (const r of results) {
    const w = byUri.get(r.uri)!
    if (r.action === 'delete' || w.action === 'delete') {
      deleted.push(w.uri)
      continue
    }
    const json = recordValueJson(w.bytes)
    if (r.action === 'create') created.push(w.uri, did, w.collection, w.rkey, r.cid, rev, now, json)
    else await updateRecord(trx, w.uri, r.cid, rev, now, json)
    for (const b of w.blobs) blobs.push(did, b, w.uri)
  }
  const uris = results.map((r) => r.uri)
  for (let i = 0; i < uris.length; i += CHUNK) {
    const part = uris.slice(i, i + CHUNK)
    await deleteRecordBlobs(trx, part)
  }
  for (let i = 0; i < deleted.length; i += CHUNK) await deleteRecords(trx, deleted.slice(i, i + CHUNK))
  if (created.length) await bulkInsert(trx, dialect, 'record', RECORD_COLUMNS, created)
  if (blobs.length) await bulkInsert(trx, dialect, 'record_blob', RECORD_BLOB_COLUMNS, blobs)
  return created.length / 8 - deleted.length
}

/** counts, per value, the records a commit's ops give it (+) or take from it (-) */
function refCounter(refs: RecordRefs) {
  return (cid: string, delta: number, bytes?: Uint8Array) => {
    const r = refs.get(cid)
    if (r) {
      r.delta += delta
      r.bytes ??= bytes
    } else refs.set(cid, { delta, bytes })
  }
}

/** the repository's current commit and tree: the cached one when it is still current */
async function loadHead(
  db: Db,
  trx: Store,
  did: string,
  rootCid: string,
): Promise<{ head: RepoHead; storage: SqlRepoStorage; built: number }> {
  const cached = takeTree(db, did, rootCid)
  if (cached) {
    const storage = cached.storage.rebind(trx)
    return { head: { did, cid: cached.cid, rev: cached.rev, data: cached.data }, storage, built: cached.built }
  }
  const storage = new SqlRepoStorage(trx, did)
  const cid = parseCid(rootCid)
  const commit = ensureV3Commit(await storage.readObj(cid, def.versionedCommit))
  return { head: { did: commit.did, cid, rev: commit.rev, data: MST.load(storage, commit.data) }, storage, built: 0 }
}

// compiled once per dialect, so the lock costs nothing per call
const selectRootLocked = prepared((db, did: string) =>
  lockingRead(dialectOf(db), db.selectFrom('repo_root').selectAll().where('did', '=', did)),
)

/** locks the repository's root row for the rest of the transaction and returns it */
export async function lockRoot(trx: Store, did: string) {
  const [row] = await selectRootLocked(trx, did)
  return row
}

export async function writeRecords(
  db: Db,
  did: string,
  writes: PreparedWrite[],
  opts: { swapCommit?: string } = {},
): Promise<{ commit: CommitRef | null; current: CommitRef; results: WriteResult[] }> {
  return db.transact(async (trx) => {
    const root = await lockRoot(trx, did)
    if (!root) throw xrpcError('InvalidRequest', `Could not find repo: ${did}`)
    if (opts.swapCommit !== undefined && opts.swapCommit !== root.cid) {
      throw xrpcError('InvalidSwap', `Commit was at ${root.cid}`)
    }

    // current CIDs of the touched records, as the index has them under the lock
    const uris = [...new Set(writes.map((w) => w.uri))]
    const current = new Map<string, string>()
    for (let i = 0; i < uris.length; i += CHUNK) {
      const part = uris.slice(i, i + CHUNK)
      for (const r of await selectRecordCids(trx, part)) current.set(r.uri, r.cid)
    }

    const ops: TreeOp[] = []
    const commitOps: CommitOp[] = []
    const refs: RecordRefs = new Map()
    const count = refCounter(refs)
    const results: WriteResult[] = []
    // updates to the content a record already has: answered, but no op (a relay rejects cid == prev)
    const unchanged = new Set<WriteResult>()
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
        ops.push({ action: 'delete', key: path })
        count(prev, -1)
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
      if (action === 'update' && prev === w.cid.toString()) {
        const r: WriteResult = { action, uri: w.uri, cid: prev, validationStatus: w.validationStatus }
        unchanged.add(r)
        results.push(r)
        continue
      }
      ops.push({ action, key: path, cid: w.cid, bytes: w.bytes })
      if (action === 'update') count(prev!, -1)
      count(w.cid.toString(), 1, w.bytes)
      if (action === 'create') commitOps.push({ action: 'create', path, cid: w.cid })
      else commitOps.push({ action: 'update', path, cid: w.cid, prev: parseCid(prev!) })
      results.push({ action, uri: w.uri, cid: w.cid.toString(), validationStatus: w.validationStatus })
    }
    if (ops.length === 0) return { commit: null, current: { cid: root.cid, rev: root.rev }, results }

    // a referenced blob must have been uploaded by this account; it is then permanent
    const blobCids = [...new Set(writes.flatMap((w) => (w.action === 'delete' ? [] : w.blobs)))]
    if (blobCids.length) {
      const have = await trx.selectFrom('blob').select('cid').where('did', '=', did).where('cid', 'in', blobCids).execute()
      const missing = blobCids.filter((c) => !have.some((h) => h.cid === c))
      if (missing.length) throw xrpcError('InvalidRequest', `Could not find blob: ${missing[0]}`)
      await trx.updateTable('blob').set({ referenced: 1 }).where('did', '=', did).where('cid', 'in', blobCids).execute()
    }

    const { head, storage, built } = await loadHead(db, trx, did, root.cid)
    const keypair = await signingKeyFor(trx, did)
    const { commit, data } = await buildCommit(head, ops, keypair)

    // the record index and blob references follow the ops
    const changed = results.filter((r) => !unchanged.has(r))
    const recordDelta = await indexRecords(trx, db.dialect, did, writes, changed, commit.rev)

    await storage.applyCommit(commit, refs)
    if (recordDelta) await countRecords(trx, did, recordDelta)

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
      prevData: head.data.pointer,
    })
    // under the lock still: the next write of this repository finds the tree if this commits
    storage.dropCache()
    putTree(db, did, { commit: commit.cid, rev: commit.rev, data, storage, built: built + commit.newBlocks.size })
    const ref = { cid: commit.cid.toString(), rev: commit.rev }
    return { commit: ref, current: ref, results }
  })
}
