// com.atproto.space.getBlob: a blob only when a record of that repo in that space references it, served as an attachment.
import { method } from '#src/api/method.js'
import { getSpaceBlob } from '#src/space/repo-read.js'

export default method(
  'com.atproto.space.getBlob',
  (deps) =>
    async ({ auth, params }) =>
      getSpaceBlob(deps, params, { did: auth.credentials.did }),
)
