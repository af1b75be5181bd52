// com.atproto.space.getRepo: the repo as a two-root CAR (commit, index, records unless excludeValues).
import { method } from '#src/api/method.js'
import { spaceReader } from '#src/auth/space-credential.js'
import { getSpaceRepoCar } from '#src/space/repo-read.js'

export default method(
  'com.atproto.space.getRepo',
  (deps) =>
    async ({ auth, params }) =>
      getSpaceRepoCar(deps, params, spaceReader(auth.credentials, params.space)),
)
