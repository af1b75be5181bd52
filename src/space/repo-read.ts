// Reads of permissioned repos, for whichever auth path admitted the caller: an account reading its
// own repo (OAuth or a session: `reader.did` set, any other repo reads as absent) or the holder
// of a space credential for the space (`reader.did` unset: any repo of that space). Each function
// checks the repo's account the same way and answers the lexicons' named errors.
import { Readable } from 'node:stream'
import { CID } from 'multiformats/cid'
import type { Db } from '../db/index.js'
import type { Store } from '../db/schema.js'
import type { BlobStore } from '../blob/blobstore.js'
import { blobAnswer, servableBlob } from '../blob/blobs.js'
import { recordValueJson } from '../repo/record-json.js'
import { findRepoAccount } from '../repo/read.js'
import { signingKeyFor } from '../repo/writer.js'
import { jsonText } from '../api/json-text.js'
import { signCommit, type SignedCommit } from './commit.js'
import { spaceCarChunks } from './car.js'
import { spaceError } from './errors.js'
import { LtHash } from './lthash.js'
import { OPS_LIMIT_DEFAULT, isAfter, opsStart, shapeOpsPage, type StoredOp } from './oplog.js'
import { parseSpaceRecordUri, parseSpaceRef, spaceRecordUri, type SpaceRef } from './refs.js'

/** who reads: `did` for an account reading its own repo; unset for a space credential's holder */
export type SpaceReader = { did?: string }
export type SpaceReadDeps = { db: Db }

type RepoQuery = { space: string; repo: string }

/**
 * The space and the repo's state after the checks every read makes: an account reading another's
 * repo finds none; an unknown, deleted or taken-down account's repo is not served, nor a
 * deactivated one to anyone but its owner. `repo` is undefined when nothing was ever written.
 */
export async function spaceRepoFor(db: Store, q: RepoQuery, reader: SpaceReader) {
  const space = parseSpaceRef(q.space)
  // an account reading with its own token sees only its own repo: others' read as absent
  if (reader.did !== undefined && q.repo !== reader.did) throw spaceError('RepoNotFound', `Could not find repo: ${q.repo}`)
  const account = q.repo.startsWith('did:') ? await findRepoAccount(db, q.repo) : undefined
  if (!account) throw spaceError('RepoNotFound', `Could not find repo: ${q.repo}`)
  if (account.status === 'takendown') throw spaceError('RepoTakendown', `Repo has been taken down: ${q.repo}`)
  if (account.status === 'deactivated' && reader.did !== q.repo) throw spaceError('RepoDeactivated', `Repo has been deactivated: ${q.repo}`)
  const repo = await db
    .selectFrom('space_repo')
    .select(['rev', 'state'])
    .where('space', '=', space.uri)
    .where('did', '=', account.did)
    .executeTakeFirst()
  return { space, did: account.did, repo: repo && { rev: repo.rev, state: new Uint8Array(repo.state) } }
}

/** a commit over the repo's current state, signed now with fresh `ikm` */
export async function signedCommitOf(
  db: Store,
  space: SpaceRef,
  did: string,
  repo: { rev: string; state: Uint8Array },
): Promise<SignedCommit> {
  const keypair = await signingKeyFor(db, did)
  return signCommit({
    space: space.uri,
    author: did,
    rev: repo.rev,
    hash: new LtHash(repo.state).digest(),
    sign: (bytes) => keypair.sign(bytes),
  })
}

async function existingRepo(db: Store, q: RepoQuery, reader: SpaceReader) {
  const found = await spaceRepoFor(db, q, reader)
  if (!found.repo) throw spaceError('RepoNotFound', `Could not find repo: ${q.repo} has written nothing in ${found.space.uri}`)
  return { ...found, repo: found.repo }
}

/** space.getLatestCommit */
export async function getLatestSpaceCommit({ db }: SpaceReadDeps, q: RepoQuery, reader: SpaceReader) {
  const { space, did, repo } = await existingRepo(db, q, reader)
  return { commit: await signedCommitOf(db, space, did, repo) }
}

/** space.getRecord: `{uri, cid, value}` as JSON text */
export async function getSpaceRecord({ db }: SpaceReadDeps, q: RepoQuery & { collection: string; rkey: string }, reader: SpaceReader) {
  const { space, did } = await spaceRepoFor(db, q, reader)
  const row = await db
    .selectFrom('space_record')
    .select(['cid', 'value'])
    .where('space', '=', space.uri)
    .where('did', '=', did)
    .where('collection', '=', q.collection)
    .where('rkey', '=', q.rkey)
    .executeTakeFirst()
  if (!row) throw spaceError('RecordNotFound', `Could not find record: ${q.collection}/${q.rkey}`)
  const uri = spaceRecordUri(space, did, q.collection, q.rkey)
  return jsonText<{ uri: string; cid: string; value: { [k: string]: unknown } }>(
    `{"uri":${JSON.stringify(uri)},"cid":${JSON.stringify(row.cid)},"value":${recordValueJson(new Uint8Array(row.value))}}`,
  )
}

export const RECORDS_LIMIT_DEFAULT = 50

/**
 * space.listRecords: newest path first (`reverse` flips), the cursor the last record's URI and
 * present only on a full page; a repo never written lists nothing
 */
export async function listSpaceRecords(
  { db }: SpaceReadDeps,
  q: RepoQuery & { collection?: string; limit?: number; cursor?: string; reverse?: boolean; excludeValues?: boolean },
  reader: SpaceReader,
) {
  const { space, did } = await spaceRepoFor(db, q, reader)
  const limit = q.limit ?? RECORDS_LIMIT_DEFAULT
  const after = q.cursor === undefined ? undefined : parseSpaceRecordUri(q.cursor, 'cursor')
  const dir = q.reverse ? 'asc' : 'desc'
  const cmp = q.reverse ? '>' : '<'
  let query = db
    .selectFrom('space_record')
    .select(['collection', 'rkey', 'cid', 'value'])
    .where('space', '=', space.uri)
    .where('did', '=', did)
    .orderBy('collection', dir)
    .orderBy('rkey', dir)
    .limit(limit)
  if (q.collection !== undefined) query = query.where('collection', '=', q.collection)
  if (after)
    query = query.where((eb) =>
      eb.or([eb('collection', cmp, after.collection), eb.and([eb('collection', '=', after.collection), eb('rkey', cmp, after.rkey)])]),
    )
  const rows = await query.execute()
  const items = rows.map((r) => {
    const head = `{"collection":${JSON.stringify(r.collection)},"rkey":${JSON.stringify(r.rkey)},"cid":${JSON.stringify(r.cid)}`
    return q.excludeValues ? head + '}' : `${head},"value":${recordValueJson(new Uint8Array(r.value))}}`
  })
  const last = rows[rows.length - 1]
  const cursor = rows.length === limit && last ? `,"cursor":${JSON.stringify(spaceRecordUri(space, did, last.collection, last.rkey))}` : ''
  return jsonText<{ cursor?: string; records: { collection: string; rkey: string; cid: string; value?: { [k: string]: unknown } }[] }>(
    `{"records":[${items.join(',')}]${cursor}}`,
  )
}

export const BLOBS_LIMIT_DEFAULT = 500

/** space.listBlobs: CIDs of blobs the repo's records in the space reference, in CID order */
export async function listSpaceBlobs(
  { db }: SpaceReadDeps,
  q: RepoQuery & { since?: string; limit?: number; cursor?: string },
  reader: SpaceReader,
) {
  const { space, did } = await spaceRepoFor(db, q, reader)
  const limit = q.limit ?? BLOBS_LIMIT_DEFAULT
  let query = db
    .selectFrom('space_record_blob')
    .select('blob_cid')
    .distinct()
    .where('space', '=', space.uri)
    .where('did', '=', did)
    .orderBy('blob_cid')
    .limit(limit)
  if (q.cursor !== undefined) query = query.where('blob_cid', '>', q.cursor)
  if (q.since !== undefined) query = query.where('rev', '>', q.since)
  const cids = (await query.execute()).map((r) => r.blob_cid)
  return { cids, ...(cids.length === limit ? { cursor: cids[cids.length - 1] } : {}) }
}

/** space.getBlob: only a blob some record of this repo in this space references */
export async function getSpaceBlob(
  { db, blobstore }: SpaceReadDeps & { blobstore: BlobStore },
  q: RepoQuery & { cid: string },
  reader: SpaceReader,
) {
  const { space, did } = await spaceRepoFor(db, q, reader)
  const linked = await db
    .selectFrom('space_record_blob')
    .select('blob_cid')
    .where('space', '=', space.uri)
    .where('did', '=', did)
    .where('blob_cid', '=', q.cid)
    .executeTakeFirst()
  const row = linked && (await servableBlob(db, did, q.cid))
  const found = row && (await blobstore.read(q.cid))
  if (!row || !found) throw spaceError('BlobNotFound', 'Blob not found')
  return blobAnswer(row.mime_type, found, { 'content-disposition': 'attachment' })
}

/** space.getRepo: the repo as a two-root CAR (commit, index, then the records unless excluded) */
export async function getSpaceRepoCar({ db }: SpaceReadDeps, q: RepoQuery & { excludeValues?: boolean }, reader: SpaceReader) {
  // the state and the records from one snapshot: a write in between would break the digest
  const snap = await db.snapshot()
  let chunks: Uint8Array[]
  try {
    const { space, did, repo } = await existingRepo(snap.store, q, reader)
    const records = await snap.store
      .selectFrom('space_record')
      .select(q.excludeValues ? ['collection', 'rkey', 'cid'] : ['collection', 'rkey', 'cid', 'value'])
      .where('space', '=', space.uri)
      .where('did', '=', did)
      .execute()
    const commit = await signedCommitOf(snap.store, space, did, repo)
    chunks = [
      ...spaceCarChunks(
        commit,
        records.map((r) => ({
          collection: r.collection,
          rkey: r.rkey,
          cid: CID.parse(r.cid),
          bytes: 'value' in r ? new Uint8Array(r.value) : undefined,
        })),
        q.excludeValues,
      ),
    ]
  } finally {
    await snap.end()
  }
  return { encoding: 'application/vnd.ipld.car' as const, body: Readable.from(chunks) }
}

/** space.listRepoOps: ops after `cursor` (or `since`) in (rev, index) order; the head page carries the commit */
export async function listSpaceRepoOps(
  { db }: SpaceReadDeps,
  q: RepoQuery & { since?: string; limit?: number; cursor?: string; excludeValues?: boolean },
  reader: SpaceReader,
) {
  const start = opsStart({ since: q.since, cursor: q.cursor })
  // the ops and the head they end at from one snapshot: a page that reached the head says which
  const snap = await db.snapshot()
  try {
    const store = snap.store
    const { space, did, repo } = await existingRepo(store, q, reader)
    const limit = q.limit ?? OPS_LIMIT_DEFAULT
    let query = store
      .selectFrom('space_op as o')
      .leftJoin('space_record as r', (j) =>
        j
          .onRef('r.space', '=', 'o.space')
          .onRef('r.did', '=', 'o.did')
          .onRef('r.collection', '=', 'o.collection')
          .onRef('r.rkey', '=', 'o.rkey'),
      )
      .select(['o.rev', 'o.idx', 'o.collection', 'o.rkey', 'o.cid', 'o.prev', 'r.cid as current_cid', 'r.value as current_value'])
      .where('o.space', '=', space.uri)
      .where('o.did', '=', did)
      .orderBy('o.rev')
      .orderBy('o.idx')
      .limit(limit)
    if (start) {
      const { rev, index } = start
      query =
        index === undefined
          ? query.where('o.rev', '>', rev)
          : query.where((eb) => eb.or([eb('o.rev', '>', rev), eb.and([eb('o.rev', '=', rev), eb('o.idx', '>', index)])]))
    }
    const rows = await query.execute()
    const stored: StoredOp[] = rows
      .map((r) => ({
        rev: r.rev,
        index: Number(r.idx),
        collection: r.collection,
        rkey: r.rkey,
        cid: r.cid,
        prev: r.prev,
        // shapeOpsPage inlines the value only where it is still this op's
        current:
          r.current_cid === r.cid && r.current_cid !== null && r.current_value !== null && !q.excludeValues
            ? { cid: r.current_cid, value: JSON.parse(recordValueJson(new Uint8Array(r.current_value))) as { [k: string]: unknown } }
            : undefined,
      }))
      .filter((op) => isAfter(op, start))
    return await shapeOpsPage(stored, limit, {
      excludeValues: q.excludeValues,
      headCommit: () => signedCommitOf(store, space, did, repo),
    })
  } finally {
    await snap.end()
  }
}

export const SPACES_LIMIT_DEFAULT = 50

/**
 * space.listSpaces: the spaces `did` holds a repo in or created as authority (and has not deleted),
 * in URI order, filtered by type and authority; not the spaces it may read
 */
export async function listSpacesOf(db: Store, did: string, q: { type?: string; did?: string; limit?: number; cursor?: string }) {
  const limit = q.limit ?? SPACES_LIMIT_DEFAULT
  // a space the account both governs and writes in is one row: union, not union all; ordered and
  // cut by the store so the cursor compares as the order does on either dialect
  const rows = await db
    .selectFrom((eb) => {
      let repos = eb.selectFrom('space_repo').select('space').where('did', '=', did)
      let governed = eb.selectFrom('space_config').select('space').where('authority', '=', did).where('deleted_at', 'is', null)
      if (q.type !== undefined) {
        repos = repos.where('type', '=', q.type)
        governed = governed.where('type', '=', q.type)
      }
      if (q.did !== undefined) {
        repos = repos.where('authority', '=', q.did)
        governed = governed.where('authority', '=', q.did)
      }
      if (q.cursor !== undefined) {
        repos = repos.where('space', '>', q.cursor)
        governed = governed.where('space', '>', q.cursor)
      }
      return repos.union(governed).as('s')
    })
    .select('s.space')
    .orderBy('s.space')
    .limit(limit)
    .execute()
  const spaces = rows.map((r) => ({ uri: r.space }))
  return { spaces, ...(spaces.length === limit ? { cursor: spaces[spaces.length - 1].uri } : {}) }
}
