// com.atproto.simplespace.updateSpace: the owner replaces the given policies wholesale; omitted ones stay.
import { method } from '#src/api/method.js'
import { readAppAccess, readPolicy, requireOwner, updateSpace } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'

export default method('com.atproto.simplespace.updateSpace', ({ db }) => async ({ auth, input }) => {
  const { policy, appAccess } = input.body
  const space = parseSpaceRef(input.body.space)
  requireOwner(auth.credentials.did, space)
  const change = {
    policy: policy === undefined ? undefined : readPolicy(policy),
    appAccess: appAccess === undefined ? undefined : readAppAccess(appAccess),
  }
  await updateSpace(db, space, change)
})
