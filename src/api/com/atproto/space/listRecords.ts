// com.atproto.space.listRecords: the caller's own records in a space, newest path first; a repo never written lists nothing.
import { method } from '#src/api/method.js'
import { spaceReader } from '#src/auth/space-credential.js'
import { listSpaceRecords } from '#src/space/repo-read.js'

export default method(
  'com.atproto.space.listRecords',
  (deps) =>
    async ({ auth, params }) =>
      listSpaceRecords(deps, params, spaceReader(auth.credentials, params.space)),
)
