// listMissingBlobs (part 2 §4.9, DECISIONS.md 8): blob references of the account's records with no
// stored bytes, paged by blob CID. A page covers `limit` distinct CIDs and every record naming
// them, so a CID never straddles two pages.
import type { Db } from '../db/index.js'

export async function listMissingBlobs(db: Db, did: string, limit: number, cursor?: string) {
  const missing = db
    .selectFrom('record_blob as rb')
    .leftJoin('blob as b', (j) => j.onRef('b.did', '=', 'rb.did').onRef('b.cid', '=', 'rb.blob_cid'))
    .where('rb.did', '=', did)
    .where('b.cid', 'is', null)
  let page = missing.select('rb.blob_cid').distinct().orderBy('rb.blob_cid').limit(limit)
  if (cursor) page = page.where('rb.blob_cid', '>', cursor)
  const cids = (await page.execute()).map((r) => r.blob_cid)
  if (!cids.length) return { blobs: [] }
  const rows = await missing
    .select(['rb.blob_cid', 'rb.record_uri'])
    .where('rb.blob_cid', 'in', cids)
    .orderBy('rb.blob_cid')
    .orderBy('rb.record_uri')
    .execute()
  return {
    ...(cids.length === limit ? { cursor: cids[cids.length - 1] } : {}),
    blobs: rows.map((r) => ({ cid: r.blob_cid, recordUri: r.record_uri })),
  }
}
