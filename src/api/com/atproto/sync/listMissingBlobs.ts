// com.atproto.sync.listMissingBlobs (this server's id; one handler serves both ids): see move/missing-blobs.ts.
import { method } from '#src/api/method.js'
import { listMissingBlobs } from '#src/move/missing-blobs.js'

export default method('com.atproto.sync.listMissingBlobs', ({ db }) => async ({ auth, params }) => ({
  encoding: 'application/json',
  body: await listMissingBlobs(db, auth.credentials.did, params.limit, params.cursor),
}))
