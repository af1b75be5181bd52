// com.atproto.repo.listMissingBlobs (official id; one handler serves both ids): see move/missing-blobs.ts.
import { method } from '#src/api/method.js'
import { listMissingBlobs } from '#src/move/missing-blobs.js'

export default method('com.atproto.repo.listMissingBlobs', ({ db }) => async ({ auth, params }) => ({
  encoding: 'application/json',
  body: await listMissingBlobs(db, auth.credentials.did, params.limit, params.cursor),
}))
