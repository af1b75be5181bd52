// listMissingBlobs (both ids): blob references of the account's records with no stored bytes, one
// entry per referencing record, in (blob CID, record URI) order, never more than `limit` a page.
// The cursor is the last blob CID when the page ended with that CID's last reference (what a
// client paging by CID expects), else `<cid>~<record uri>`, so a CID's references may continue on
// the next page.
import { sql } from 'kysely'
import type { Db } from '../db/index.js'

// URL-safe, and never part of a CID
const SEPARATOR = '~'

export async function listMissingBlobs(db: Db, did: string, limit: number, cursor?: string) {
  const [afterCid, afterUri] = parseCursor(cursor)
  let page = db
    .selectFrom('record_blob as rb')
    .leftJoin('blob as b', (j) => j.onRef('b.did', '=', 'rb.did').onRef('b.cid', '=', 'rb.blob_cid'))
    .select(['rb.blob_cid', 'rb.record_uri'])
    .where('rb.did', '=', did)
    .where('b.cid', 'is', null)
    .orderBy('rb.blob_cid')
    .orderBy('rb.record_uri')
    // one row past the page says whether there is more, and whether the last CID ends here
    .limit(sql.lit(limit + 1))
  if (afterUri !== undefined) {
    page = page.where((eb) =>
      eb.or([eb('rb.blob_cid', '>', afterCid!), eb.and([eb('rb.blob_cid', '=', afterCid!), eb('rb.record_uri', '>', afterUri)])]),
    )
  } else if (afterCid !== undefined) page = page.where('rb.blob_cid', '>', afterCid)
  const rows = await page.execute()
  const blobs = rows.slice(0, limit).map((r) => ({ cid: r.blob_cid, recordUri: r.record_uri }))
  if (rows.length <= limit) return { blobs }
  const last = blobs[blobs.length - 1]
  const next = rows[limit].blob_cid === last.cid ? `${last.cid}${SEPARATOR}${last.recordUri}` : last.cid
  return { cursor: next, blobs }
}

function parseCursor(cursor: string | undefined): [string?, string?] {
  if (!cursor) return []
  const at = cursor.indexOf(SEPARATOR)
  return at < 0 ? [cursor] : [cursor.slice(0, at), cursor.slice(at + 1)]
}
