// com.atproto.sync.listBlobs: CIDs of the blobs the repository's records reference, paged by CID;
// since: only those of records written after that revision.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { syncRepo } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.listBlobs<AuthFor<'com.atproto.sync.listBlobs'>>(async ({ params }) => {
    await syncRepo(db, params.did)
    const limit = params.limit ?? 500
    let q = db
      .selectFrom('record_blob')
      .select('record_blob.blob_cid')
      .distinct()
      .where('record_blob.did', '=', params.did)
      .orderBy('record_blob.blob_cid')
      .limit(limit)
    if (params.cursor) q = q.where('record_blob.blob_cid', '>', params.cursor)
    if (params.since) {
      q = q
        .innerJoin('record', 'record.uri', 'record_blob.record_uri')
        .where('record.rev', '>', params.since)
    }
    const rows = await q.execute()
    const cids = rows.map((r) => r.blob_cid)
    return {
      encoding: 'application/json',
      body: { cids, ...(cids.length === limit ? { cursor: cids[cids.length - 1] } : {}) },
    }
  })
