// com.atproto.space.getRecord: one record of the caller's own repo in a space; absent is RecordNotFound.
import { method } from '#src/api/method.js'
import { spaceReader } from '#src/auth/space-credential.js'
import { getSpaceRecord } from '#src/space/repo-read.js'

export default method(
  'com.atproto.space.getRecord',
  (deps) =>
    async ({ auth, params }) =>
      getSpaceRecord(deps, params, spaceReader(auth.credentials, params.space)),
)
