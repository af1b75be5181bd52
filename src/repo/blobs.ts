// Blob metadata around the blob store: an upload becomes a row of the uploading account, permanent
// once a record references it (at once if a record already does, DECISIONS.md 15); unreferenced
// uploads are collected after a grace period.
import type { Readable } from 'node:stream'
import type { Db } from '../db/index.js'
import type { BlobStore } from './blobstore.js'

/** how long an upload may wait for a record to reference it */
export const BLOB_GRACE_MS = 60 * 60 * 1000

export async function storeUpload(
  deps: { db: Db; blobstore: BlobStore },
  did: string,
  input: Readable,
  mimeType: string,
  limit: number,
) {
  const staged = await deps.blobstore.stage(input, limit)
  try {
    await deps.blobstore.commit(staged)
  } catch (err) {
    await deps.blobstore.discard(staged)
    throw err
  }
  const now = new Date().toISOString()
  await deps.db.transaction().execute(async (trx) => {
    const ref = await trx
      .selectFrom('record_blob')
      .select('record_uri')
      .where('did', '=', did)
      .where('blob_cid', '=', staged.cid)
      .limit(1)
      .executeTakeFirst()
    await trx
      .insertInto('blob')
      .values({ did, cid: staged.cid, mime_type: mimeType, size: staged.size, referenced: ref ? 1 : 0, created_at: now })
      // a repeated upload restarts the grace period of an unreferenced blob
      .onConflict((oc) => oc.columns(['did', 'cid']).doUpdateSet({ created_at: now, ...(ref ? { referenced: 1 } : {}) }))
      .execute()
  })
  return { cid: staged.cid, size: staged.size, mimeType }
}

/** removes uploads no record referenced within the grace period; returns how many */
export async function collectBlobs(deps: { db: Db; blobstore: BlobStore }, now = Date.now()): Promise<number> {
  const cutoff = new Date(now - BLOB_GRACE_MS).toISOString()
  const stale = await deps.db
    .selectFrom('blob')
    .select(['did', 'cid'])
    .where('referenced', '=', 0)
    .where('created_at', '<', cutoff)
    .limit(1000)
    .execute()
  let removed = 0
  for (const b of stale) {
    // conditional: a record that referenced it meanwhile keeps it
    const res = await deps.db
      .deleteFrom('blob')
      .where('did', '=', b.did)
      .where('cid', '=', b.cid)
      .where('referenced', '=', 0)
      .where('created_at', '<', cutoff)
      .executeTakeFirst()
    if (!Number(res.numDeletedRows)) continue
    removed++
    const other = await deps.db.selectFrom('blob').select('did').where('cid', '=', b.cid).limit(1).executeTakeFirst()
    if (!other) await deps.blobstore.delete(b.cid)
  }
  return removed
}
