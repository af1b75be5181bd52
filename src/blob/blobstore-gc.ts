// The blob sweeper: removes blob rows no record references (an upload never used within the grace
// period, or one whose last record was deleted) and the blobs of deleted accounts, then the bytes
// once no account holds that CID. Each row is removed under a per-CID lock that uploads take too,
// so the same bytes uploaded again while they are swept survive (see storeUpload).
import { sql, type ExpressionBuilder } from 'kysely'
import type { Db, Dialect } from '../db/index.js'
import { advisoryLockByName } from '../db/dialect.js'
import type { Schema, Store } from '../db/schema.js'
import type { BlobStore } from './blobstore.js'
import { lockRoot } from '../repo/writer.js'
import { JOBS } from '../limits.js'

export type Sweepable = { did: string; cid: string; size: number; reason: 'unreferenced' | 'account deleted' }

const BATCH = JOBS.blobSweepBatch
// a staged upload this old was left by a crash: no upload runs for a day
const STAGED_MAX_AGE_MS = 24 * 3600_000

/**
 * runs `fn` in a transaction that excludes every other holder of the same CID: a PostgreSQL
 * advisory lock across processes; on SQLite the write lock its first write statement takes
 */
export function withCidLock<T>(db: Db, cid: string, fn: (trx: Store) => Promise<T>): Promise<T> {
  return db.transact(async (trx) => {
    await advisoryLockByName(trx, 'blob:' + cid)
    return fn(trx)
  })
}

type BlobEb = ExpressionBuilder<Schema, 'blob'>

// the account is gone or deleted, or no record of it references the blob and the grace period ended
function sweepableWhere(cutoff: string) {
  return (eb: BlobEb) =>
    eb.or([
      eb.not(
        eb.exists(
          eb.selectFrom('account').select('account.did').whereRef('account.did', '=', 'blob.did').where('account.status', '!=', 'deleted'),
        ),
      ),
      eb.and([
        eb('blob.created_at', '<', cutoff),
        eb.not(
          eb.exists(
            eb
              .selectFrom('record_blob')
              .select('record_blob.did')
              .whereRef('record_blob.did', '=', 'blob.did')
              .whereRef('record_blob.blob_cid', '=', 'blob.cid'),
          ),
        ),
        // a record in a space keeps its blobs as a public record does
        eb.not(
          eb.exists(
            eb
              .selectFrom('space_record_blob')
              .select('space_record_blob.did')
              .whereRef('space_record_blob.did', '=', 'blob.did')
              .whereRef('space_record_blob.blob_cid', '=', 'blob.cid'),
          ),
        ),
      ]),
    ])
}

/** blob rows the sweeper would remove now, with why */
export async function findSweepable(db: Db, graceMs: number, now = Date.now(), limit = BATCH): Promise<Sweepable[]> {
  const cutoff = new Date(now - graceMs).toISOString()
  const rows = await db
    .selectFrom('blob')
    .leftJoin('account', 'account.did', 'blob.did')
    .select(['blob.did', 'blob.cid', 'blob.size', 'account.status'])
    .where(sweepableWhere(cutoff))
    .orderBy('blob.cid')
    .limit(limit)
    .execute()
  return rows.map((r) => ({
    did: r.did,
    cid: r.cid,
    size: Number(r.size),
    reason: !r.status || r.status === 'deleted' ? 'account deleted' : 'unreferenced',
  }))
}

/** whether removing these rows frees each CID's bytes (no other account holds it) */
export async function freesBytes(db: Db, rows: Sweepable[]): Promise<Set<string>> {
  const byCid = new Map<string, number>()
  for (const r of rows) byCid.set(r.cid, (byCid.get(r.cid) ?? 0) + 1)
  const out = new Set<string>()
  for (const [cid, n] of byCid) {
    const { count } = await db
      .selectFrom('blob')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('cid', '=', cid)
      .executeTakeFirstOrThrow()
    if (Number(count) <= n) out.add(cid)
  }
  return out
}

/** removes one row if it is still sweepable, then its bytes if no row holds the CID; bytes freed */
async function sweepOne(db: Db, dialect: Dialect, blobstore: BlobStore, row: Sweepable, cutoff: string): Promise<number | null> {
  return withCidLock(db, row.cid, async (trx) => {
    // a write referencing the blob holds the repository's lock while it checks the row and adds its reference
    await lockRoot(trx, row.did)
    const res = await trx
      .deleteFrom('blob')
      .where('did', '=', row.did)
      .where('cid', '=', row.cid)
      .where(sweepableWhere(cutoff))
      .executeTakeFirst()
    if (!Number(res.numDeletedRows)) return null
    const other = await trx.selectFrom('blob').select('did').where('cid', '=', row.cid).limit(1).executeTakeFirst()
    if (other) return 0
    // still under the lock: an upload of the same bytes waits, then finds them gone and restores them
    await blobstore.delete(row.cid)
    return row.size
  })
}

/** one sweep of up to `limit` rows; returns what was removed and the bytes freed */
export async function sweepBlobs(
  deps: { db: Db; blobstore: BlobStore },
  graceMs: number,
  now = Date.now(),
  limit = BATCH,
): Promise<{ removed: Sweepable[]; bytes: number; staged: number }> {
  const staged = await deps.blobstore.sweepStaged(new Date(now - STAGED_MAX_AGE_MS))
  const cutoff = new Date(now - graceMs).toISOString()
  const removed: Sweepable[] = []
  let bytes = 0
  for (const row of await findSweepable(deps.db, graceMs, now, limit)) {
    const freed = await sweepOne(deps.db, deps.db.dialect, deps.blobstore, row, cutoff)
    if (freed === null) continue
    removed.push(row)
    bytes += freed
  }
  return { removed, bytes, staged }
}

/** bytes the blob store holds, from the blob rows (each CID counted once) */
export async function storedBlobBytes(db: Db): Promise<number> {
  const row = await db
    .selectFrom((eb) =>
      eb
        .selectFrom('blob')
        .select((b) => ['cid', b.fn.max('size').as('size')])
        .groupBy('cid')
        .as('t'),
    )
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('t.size'), sql<number>`0`).as('total'))
    .executeTakeFirstOrThrow()
  return Number(row.total)
}

/** storedBlobBytes for a metrics gauge: read from the table at most once per `maxAgeMs` */
export function cachedBlobBytes(db: Db, maxAgeMs = 60_000): () => Promise<number> {
  let value = 0
  let at = -Infinity
  let pending: Promise<number> | undefined
  return async () => {
    if (Date.now() - at < maxAgeMs) return value
    pending ??= storedBlobBytes(db)
      .then((v) => {
        value = v
        at = Date.now()
        return v
      })
      .finally(() => (pending = undefined))
    return pending
  }
}
