// Blob metadata around the blob store: an upload becomes a row of the uploading account, permanent
// once a record references it (at once if a record already does, as after an import); unreferenced
// uploads are collected after a grace period.
import type { Readable } from 'node:stream'
import type { Db } from '../db/index.js'
import type { BlobStore } from './blobstore.js'
import { exec } from '../db/raw.js'

// as SQL text: Kysely compiling these two on every upload cost more than running them
const REFERENCED = 'select 1 as one from record_blob where did = ? and blob_cid = ? limit 1'
// a repeated upload restarts the grace period of an unreferenced blob; a referenced one stays so
const INSERT_BLOB =
  'insert into blob (did, cid, mime_type, size, referenced, created_at) values (?, ?, ?, ?, ?, ?) ' +
  'on conflict (did, cid) do update set created_at = excluded.created_at, ' +
  'referenced = case when excluded.referenced = 1 then 1 else blob.referenced end'

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
  const { db } = deps
  await db.transaction().execute(async (trx) => {
    const { rows } = await exec(trx, db.dialect, REFERENCED, [did, staged.cid])
    await exec(trx, db.dialect, INSERT_BLOB, [did, staged.cid, mimeType, staged.size, rows.length > 0 ? 1 : 0, now])
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
