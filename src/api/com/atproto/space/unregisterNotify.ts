// com.atproto.space.unregisterNotify: idempotent; the service is not resolved.
import { method } from '#src/api/method.js'
import { unregisterNotify } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'
import { requireCredentialFor } from '#src/space/tokens.js'

export default method('com.atproto.space.unregisterNotify', ({ db }) => async ({ auth, input }) => {
  const space = parseSpaceRef(input.body.space)
  requireCredentialFor(auth.credentials.claims, space.uri)
  await unregisterNotify(db, space, input.body.service)
})
