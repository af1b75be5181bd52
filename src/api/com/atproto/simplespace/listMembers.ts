// com.atproto.simplespace.listMembers: the owner only, sorted by DID; the owner is not implicitly listed.
import { method } from '#src/api/method.js'
import { activeSpace, listMembers, requireOwner } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'

export default method('com.atproto.simplespace.listMembers', ({ db }) => async ({ auth, params }) => {
  const space = parseSpaceRef(params.space)
  requireOwner(auth.credentials.did, space)
  await activeSpace(db, space)
  return { encoding: 'application/json', body: await listMembers(db, space, params.limit ?? 100, params.cursor) }
})
