// com.atproto.space.getBlob: a blob only when a record of that repo in that space references it, served as an attachment.
import { method } from '#src/api/method.js'
import { spaceReader } from '#src/auth/space-credential.js'
import { getSpaceBlob } from '#src/space/repo-read.js'

export default method(
  'com.atproto.space.getBlob',
  (deps) =>
    async ({ auth, params }) =>
      getSpaceBlob(deps, params, spaceReader(auth.credentials, params.space)),
)
