// com.atproto.space.listSpaces: the spaces the caller holds a repo in or governs, in URI order; not the spaces it may read.
import { method } from '#src/api/method.js'
import { listSpacesOf } from '#src/space/repo-read.js'

export default method('com.atproto.space.listSpaces', ({ db }) => async ({ auth, params }) => ({
  encoding: 'application/json',
  body: await listSpacesOf(db, auth.credentials.did, params),
}))
