// com.atproto.identity.resolveDid for DIDs hosted here: rendered from the local operation log, or
// read from the PLC directory in PDS_DID_PLC_URL mode.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { hostedDidDocument } from '#src/identity/identity.js'

export default method('com.atproto.identity.resolveDid', (deps: Pick<Services, 'db' | 'config'>) => async ({ params }) => ({
  encoding: 'application/json',
  body: { didDoc: await hostedDidDocument(deps, params.did) },
}))
