// com.atproto.sync.listBlobs: CIDs of the blobs the repository's records reference, paged by CID;
// since: only those of records written after that revision.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { syncRepo } from '../../../../repo/read.js'
import { referencedBlobCids } from '../../../../repo/blobs.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.listBlobs<AuthFor<'com.atproto.sync.listBlobs'>>(async ({ params }) => {
    await syncRepo(db, params.did)
    const limit = params.limit ?? 500
    const cids = await referencedBlobCids(db, params.did, { limit, cursor: params.cursor, since: params.since })
    return {
      encoding: 'application/json',
      body: { cids, ...(cids.length === limit ? { cursor: cids[cids.length - 1] } : {}) },
    }
  })
