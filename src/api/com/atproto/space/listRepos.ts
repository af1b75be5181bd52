// com.atproto.space.listRepos: the writer set as notifications reported it, sorted by DID; not an access list.
import { method } from '#src/api/method.js'
import { governedSpace, listWriters } from '#src/space/host.js'
import { parseSpaceRef } from '#src/space/refs.js'
import { requireCredentialFor } from '#src/space/tokens.js'

export default method('com.atproto.space.listRepos', ({ db }) => async ({ auth, params }) => {
  const space = parseSpaceRef(params.space)
  requireCredentialFor(auth.credentials.claims, space.uri)
  await governedSpace(db, space)
  return { encoding: 'application/json', body: await listWriters(db, space, params.limit ?? 100, params.cursor) }
})
