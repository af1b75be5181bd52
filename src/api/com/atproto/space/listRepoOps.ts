// com.atproto.space.listRepoOps: the operation log after a cursor or rev; the page reaching the head carries the commit.
import { method } from '#src/api/method.js'
import { spaceReader } from '#src/auth/space-credential.js'
import { listSpaceRepoOps } from '#src/space/repo-read.js'
import type { OutputSchema } from '#src/generated/server/types/com/atproto/space/listRepoOps.js'

export default method('com.atproto.space.listRepoOps', (deps) => async ({ auth, params }) => ({
  encoding: 'application/json',
  // values are record objects: the oplog types them as unknown
  body: (await listSpaceRepoOps(deps, params, spaceReader(auth.credentials, params.space))) as OutputSchema,
}))
