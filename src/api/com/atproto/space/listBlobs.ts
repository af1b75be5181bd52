// com.atproto.space.listBlobs: the blobs the caller's records in a space reference, in CID order.
import { method } from '#src/api/method.js'
import { spaceReader } from '#src/auth/space-credential.js'
import { listSpaceBlobs } from '#src/space/repo-read.js'

export default method('com.atproto.space.listBlobs', (deps) => async ({ auth, params }) => ({
  encoding: 'application/json',
  body: await listSpaceBlobs(deps, params, spaceReader(auth.credentials, params.space)),
}))
