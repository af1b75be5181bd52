// com.atproto.simplespace.deleteSpace: the owner leaves a tombstone; deleting again is not an error.
import { method } from '#src/api/method.js'
import { deleteSpace, requireOwner } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'
import { deleteSpaceRepo } from '#src/space/repo-write.js'

export default method('com.atproto.simplespace.deleteSpace', (deps) => async ({ auth, input }) => {
  const space = parseSpaceRef(input.body.space)
  requireOwner(auth.credentials.did, space)
  // the authority's own records in the space go with it; other members' repos stay with their owners
  await deleteSpace(deps, space, (tx) => deleteSpaceRepo(tx, space.uri, space.authority))
})
