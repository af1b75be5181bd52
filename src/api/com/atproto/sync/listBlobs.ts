// com.atproto.sync.listBlobs: CIDs of the blobs the repository's records reference, paged by CID;
// since: only those of records written after that revision.
import { method } from '#src/api/method.js'
import { syncRepo } from '#src/repo/read.js'
import { referencedBlobCids } from '#src/blob/blobs.js'

export default method('com.atproto.sync.listBlobs', ({ db }) => async ({ params }) => {
  await syncRepo(db, params.did)
  const limit = params.limit ?? 500
  const cids = await referencedBlobCids(db, params.did, { limit, cursor: params.cursor, since: params.since })
  return {
    encoding: 'application/json',
    body: { cids, ...(cids.length === limit ? { cursor: cids[cids.length - 1] } : {}) },
  }
})
