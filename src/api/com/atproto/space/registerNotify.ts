// com.atproto.space.registerNotify: a syncer holding a credential asks for the space's notifications for 24 h.
import { method } from '#src/api/method.js'
import { registerNotify } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'
import { requireCredentialFor } from '#src/space/tokens.js'

export default method('com.atproto.space.registerNotify', (deps) => async ({ auth, input }) => {
  const space = parseSpaceRef(input.body.space)
  requireCredentialFor(auth.credentials.claims, space.uri)
  const expiresAt = await registerNotify(deps, space, input.body.service)
  return { encoding: 'application/json', body: { expiresAt } }
})
