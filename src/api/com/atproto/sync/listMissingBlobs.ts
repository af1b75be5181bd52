// com.atproto.sync.listMissingBlobs (this server's id; one handler serves both ids): see migration/missing-blobs.ts.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { listMissingBlobs } from '../../../../migration/missing-blobs.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.listMissingBlobs<AuthFor<'com.atproto.sync.listMissingBlobs'>>(async ({ auth, params }) => ({
    encoding: 'application/json',
    body: await listMissingBlobs(db, auth.credentials.did, params.limit, params.cursor),
  }))
