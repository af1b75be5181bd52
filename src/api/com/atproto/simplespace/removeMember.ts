// com.atproto.simplespace.removeMember: idempotent; removing a non-member is not an error.
import { method } from '#src/api/method.js'
import { removeMember, requireOwner } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'

export default method('com.atproto.simplespace.removeMember', ({ db }) => async ({ auth, input }) => {
  const space = parseSpaceRef(input.body.space)
  requireOwner(auth.credentials.did, space)
  await removeMember(db, space, input.body.did)
})
