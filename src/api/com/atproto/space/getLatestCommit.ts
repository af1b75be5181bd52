// com.atproto.space.getLatestCommit: the repo's commit, signed anew with fresh ikm at every call.
import { method } from '#src/api/method.js'
import { spaceReader } from '#src/auth/space-credential.js'
import { getLatestSpaceCommit } from '#src/space/repo-read.js'

export default method('com.atproto.space.getLatestCommit', (deps) => async ({ auth, params }) => ({
  encoding: 'application/json',
  body: await getLatestSpaceCommit(deps, params, spaceReader(auth.credentials, params.space)),
}))
