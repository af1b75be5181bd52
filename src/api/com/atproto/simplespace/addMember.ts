// com.atproto.simplespace.addMember: idempotent; the member is not told.
import { method } from '#src/api/method.js'
import { addMember, requireOwner } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'

export default method('com.atproto.simplespace.addMember', ({ db }) => async ({ auth, input }) => {
  const space = parseSpaceRef(input.body.space)
  requireOwner(auth.credentials.did, space)
  await addMember(db, space, input.body.did)
})
