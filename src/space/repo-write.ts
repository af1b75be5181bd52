// Writes into a permissioned repo: one batch is one transaction and one new rev. The LtHash state,
// the records, the operation log and the record->blob links change together, under a lock on the
// (space, account) pair; the space host hears of the write only once it committed.
import { TID } from '@atproto/common'
import type { Db } from '../db/index.js'
import type { Store } from '../db/schema.js'
import { advisoryLockByName, lockingRead } from '../db/dialect.js'
import type { Logger } from '../logger.js'
import { prepareRecordWrite, type ValidationStatus } from '../repo/prepare.js'
import { xrpcError } from '../errors.js'
import { spaceError } from './errors.js'
import { LtHash } from './lthash.js'
import { spaceRecordUri, type SpaceRef } from './refs.js'

/** tells the space's host that `did`'s repo in `space` is now at `rev` with digest `hash`; best effort */
export type NotifyWrite = (space: string, did: string, rev: string, hash: Uint8Array) => Promise<void> | void

/** the default hook: no space host is told anything */
export const notifyNothing: NotifyWrite = () => {}

/** a space deleted with its authority's account, and the syncers registered for it until then */
export type DeletedSpace = { space: string; services: string[] }

/** tells those syncers of the deletion, once it committed; best effort, never throws */
export type NotifySpacesDeleted = (spaces: DeletedSpace[]) => void

export const MAX_SPACE_WRITES = 200

export type SpaceWrite =
  | { action: 'create' | 'update'; collection: string; rkey?: string; record: unknown; validate?: boolean; upsert?: boolean }
  | { action: 'delete'; collection: string; rkey: string; ignoreMissing?: boolean }

export type SpaceWriteResult =
  { action: 'create' | 'update'; uri: string; cid: string; validationStatus?: ValidationStatus } | { action: 'delete' }

/** whether the caller may do `action` on `collection` (an OAuth grant's `space:` permissions) */
export type MayWrite = (action: 'create' | 'update' | 'delete', collection: string) => boolean

export type SpaceWriteDeps = { db: Db; notifyWrite: NotifyWrite; logger?: Logger }

type Prepared = Awaited<ReturnType<typeof prepareRecordWrite>>

/**
 * Applies `writes` to `did`'s repo in `space`, all or nothing. Returns the new rev, or null when
 * nothing changed (an empty batch, deleting what is absent): no rev and no notification then.
 */
export async function writeSpaceRecords(
  deps: SpaceWriteDeps,
  space: SpaceRef,
  did: string,
  writes: SpaceWrite[],
  mayWrite: MayWrite = () => true,
): Promise<{ rev: string | null; results: SpaceWriteResult[] }> {
  if (writes.length > MAX_SPACE_WRITES)
    throw xrpcError('InvalidRequest', `Too many writes: at most ${MAX_SPACE_WRITES} in one call, not ${writes.length}`)
  // records are checked and encoded before the transaction: nothing is held while that runs
  const prepared: (Prepared | undefined)[] = []
  for (const w of writes) {
    if (w.action === 'delete') {
      prepared.push(undefined)
      continue
    }
    const rec = w.record as { $type?: unknown } | null
    if (rec && typeof rec === 'object' && !Array.isArray(rec) && rec.$type === undefined)
      throw xrpcError('InvalidRequest', 'Record must have a $type equal to its collection')
    prepared.push(
      await prepareRecordWrite(did, { action: w.action, collection: w.collection, rkey: w.rkey, record: w.record, validate: w.validate }),
    )
  }
  const { db } = deps
  const out = await db.transact(async (trx) => {
    await advisoryLockByName(trx, `space_repo:${space.uri}:${did}`)
    const row = await lockingRead(
      db.dialect,
      trx.selectFrom('space_repo').select(['rev', 'state']).where('space', '=', space.uri).where('did', '=', did),
    ).executeTakeFirst()
    const hash = new LtHash(row ? new Uint8Array(row.state) : undefined)
    // the current CID of each path the batch touches, as the batch goes on
    const current = new Map<string, string | null>()
    const cidAt = async (collection: string, rkey: string) => {
      const path = `${collection}/${rkey}`
      if (!current.has(path)) {
        const r = await trx
          .selectFrom('space_record')
          .select('cid')
          .where('space', '=', space.uri)
          .where('did', '=', did)
          .where('collection', '=', collection)
          .where('rkey', '=', rkey)
          .executeTakeFirst()
        current.set(path, r?.cid ?? null)
      }
      return current.get(path)!
    }
    type Op = { collection: string; rkey: string; cid: string | null; prev: string | null; record?: Prepared }
    const ops: Op[] = []
    const results: SpaceWriteResult[] = []
    for (const [i, w] of writes.entries()) {
      const p = prepared[i]
      // a prepared record has its rkey (a TID when none was given); a delete names one
      const { collection, rkey } = p ?? (w as { collection: string; rkey: string })
      const prev = await cidAt(collection, rkey)
      if (w.action === 'delete') {
        if (prev === null) {
          if (w.ignoreMissing) {
            results.push({ action: 'delete' })
            continue
          }
          throw spaceError('RecordNotFound', `Could not find record: ${collection}/${rkey}`)
        }
        if (!mayWrite('delete', collection)) throw scopeRefusal(space, 'delete', collection)
        hash.removeRecord(collection, rkey, prev)
        current.set(`${collection}/${rkey}`, null)
        ops.push({ collection, rkey, cid: null, prev })
        results.push({ action: 'delete' })
        continue
      }
      let action = w.action
      if (action === 'create' && prev !== null) throw spaceError('RecordAlreadyExists', `A record already exists at ${collection}/${rkey}`)
      if (action === 'update' && prev === null) {
        if (!w.upsert) throw spaceError('RecordNotFound', `Could not find record: ${collection}/${rkey}`)
        action = 'create'
      }
      if (!mayWrite(action, collection)) throw scopeRefusal(space, action, collection)
      const cid = p!.cid.toString()
      const uri = spaceRecordUri(space, did, collection, rkey)
      results.push({ action, uri, cid, ...(p!.validationStatus ? { validationStatus: p!.validationStatus } : {}) })
      // the same value again changes nothing
      if (prev === cid) continue
      if (prev !== null) hash.removeRecord(collection, rkey, prev)
      hash.addRecord(collection, rkey, cid)
      current.set(`${collection}/${rkey}`, cid)
      ops.push({ collection, rkey, cid, prev, record: p })
    }
    if (ops.length === 0) return { rev: null, results }

    // a referenced blob must have been uploaded by this account
    const blobCids = [...new Set(ops.flatMap((o) => o.record?.blobs ?? []))]
    if (blobCids.length) {
      const have = new Set(
        (await trx.selectFrom('blob').select('cid').where('did', '=', did).where('cid', 'in', blobCids).execute()).map((r) => r.cid),
      )
      const missing = blobCids.find((c) => !have.has(c))
      if (missing) throw xrpcError('InvalidRequest', `Could not find blob: ${missing}`)
      await trx.updateTable('blob').set({ referenced: 1 }).where('did', '=', did).where('cid', 'in', blobCids).execute()
    }

    const rev = TID.nextStr(row?.rev)
    const state = hash.state()
    if (row) {
      await trx.updateTable('space_repo').set({ rev, state }).where('space', '=', space.uri).where('did', '=', did).execute()
    } else {
      await trx
        .insertInto('space_repo')
        .values({ space: space.uri, did, authority: space.authority, type: space.type, rev, state, created_at: new Date().toISOString() })
        .execute()
    }
    for (const [idx, o] of ops.entries()) {
      await trx
        .deleteFrom('space_record_blob')
        .where('space', '=', space.uri)
        .where('did', '=', did)
        .where('collection', '=', o.collection)
        .where('rkey', '=', o.rkey)
        .execute()
      if (o.cid === null) {
        await trx
          .deleteFrom('space_record')
          .where('space', '=', space.uri)
          .where('did', '=', did)
          .where('collection', '=', o.collection)
          .where('rkey', '=', o.rkey)
          .execute()
      } else {
        const rec = o.record!
        const values = { space: space.uri, did, collection: o.collection, rkey: o.rkey, cid: o.cid, rev, value: rec.bytes }
        await trx
          .insertInto('space_record')
          .values(values)
          .onConflict((oc) => oc.columns(['space', 'did', 'collection', 'rkey']).doUpdateSet({ cid: o.cid!, rev, value: rec.bytes }))
          .execute()
        if (rec.blobs.length)
          await trx
            .insertInto('space_record_blob')
            .values(rec.blobs.map((blob_cid) => ({ space: space.uri, did, collection: o.collection, rkey: o.rkey, blob_cid, rev })))
            .execute()
      }
      await trx
        .insertInto('space_op')
        .values({ space: space.uri, did, rev, idx, collection: o.collection, rkey: o.rkey, cid: o.cid, prev: o.prev })
        .execute()
    }
    const digest = hash.digest()
    trx.onCommit(() => notify(deps, space.uri, did, rev, digest))
    return { rev, results }
  })
  return out
}

// the host hears of the write after it committed; whatever happens there is not the writer's business
function notify(deps: SpaceWriteDeps, space: string, did: string, rev: string, hash: Uint8Array) {
  try {
    void Promise.resolve(deps.notifyWrite(space, did, rev, hash)).catch((err: unknown) =>
      deps.logger?.warn({ err: String(err), space, did }, 'space write notification failed'),
    )
  } catch (err) {
    deps.logger?.warn({ err: String(err), space, did }, 'space write notification failed')
  }
}

function scopeRefusal(space: SpaceRef, action: string, collection: string) {
  return xrpcError('InsufficientScope', `Missing required scope for ${action} of ${collection} in ${space.uri}`)
}

/** removes `did`'s repo in one space: records, log, state and blob links */
export async function deleteSpaceRepo(trx: Store, space: string, did: string): Promise<void> {
  for (const table of ['space_record_blob', 'space_op', 'space_record', 'space_repo'] as const) {
    await trx.deleteFrom(table).where('space', '=', space).where('did', '=', did).execute()
  }
}

/**
 * An account's deletion (inside that transaction) takes with it every permissioned repo it holds,
 * and its place in the writer sets of spaces governed here; the spaces it governs become
 * tombstones as deleteSpace leaves them (credentials answer SpaceDeleted), with their member
 * lists, writer sets and registrations gone. Other members' repos stay with their owners.
 * Returns those spaces with the syncers registered for them, for the caller to tell once it committed.
 */
export async function deleteSpaceRepos(trx: Store, did: string): Promise<DeletedSpace[]> {
  // read before the registrations go: these syncers are owed a notifySpaceDeleted
  const registered = await trx
    .selectFrom('space_notify')
    .innerJoin('space_config', 'space_config.space', 'space_notify.space')
    .select(['space_notify.space', 'space_notify.service'])
    .where('space_config.authority', '=', did)
    .where('space_config.deleted_at', 'is', null)
    .where('space_notify.expires_at', '>', new Date().toISOString())
    .orderBy('space_notify.space')
    .execute()
  const deleted = new Map<string, string[]>()
  for (const r of registered) deleted.set(r.space, [...(deleted.get(r.space) ?? []), r.service])
  for (const table of ['space_record_blob', 'space_op', 'space_record', 'space_repo', 'space_writer'] as const) {
    await trx.deleteFrom(table).where('did', '=', did).execute()
  }
  const hosted = trx.selectFrom('space_config').select('space').where('authority', '=', did)
  for (const table of ['space_member', 'space_writer', 'space_notify'] as const) {
    await trx.deleteFrom(table).where('space', 'in', hosted).execute()
  }
  await trx
    .updateTable('space_config')
    .set({ deleted_at: new Date().toISOString() })
    .where('authority', '=', did)
    .where('deleted_at', 'is', null)
    .execute()
  return [...deleted].map(([space, services]) => ({ space, services }))
}
