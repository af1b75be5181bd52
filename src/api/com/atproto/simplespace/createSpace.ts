// com.atproto.simplespace.createSpace: the caller becomes the authority; a deleted space may be created again.
import { TID } from '@atproto/common'
import { method } from '#src/api/method.js'
import { createSpace, readAppAccess, readPolicy } from '#src/space/host.js'
import { spaceRef } from '#src/space/refs.js'

export default method('com.atproto.simplespace.createSpace', ({ db }) => async ({ auth, input }) => {
  const { type, skey, policy, appAccess } = input.body
  const space = spaceRef(auth.credentials.did, type, skey ?? TID.nextStr())
  await createSpace(db, space, readPolicy(policy), readAppAccess(appAccess))
  return { encoding: 'application/json', body: { uri: space.uri } }
})
