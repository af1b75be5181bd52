// com.atproto.simplespace.getSpace: the owner (OAuth or session), or the holder of a credential for the space.
import { method } from '#src/api/method.js'
import { governedSpace, requireOwner } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'
import { requireCredentialFor } from '#src/space/tokens.js'

export default method('com.atproto.simplespace.getSpace', ({ db }) => async ({ auth, params }) => {
  const space = parseSpaceRef(params.space)
  const creds = auth.credentials
  if (creds.type === 'spaceCredential') requireCredentialFor(creds.claims, space.uri)
  else requireOwner(creds.did, space)
  const config = await governedSpace(db, space)
  return { encoding: 'application/json', body: { uri: space.uri, policy: config.policy, appAccess: config.appAccess } }
})
