// com.atproto.identity.resolveDid for DIDs hosted here: rendered from the local operation log, or
// read from the PLC directory in PDS_DID_PLC_URL mode.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { hostedDidDocument } from '../../../../identity/identity.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.identity.resolveDid<AuthFor<'com.atproto.identity.resolveDid'>>(async ({ params }) => ({
    encoding: 'application/json',
    body: { didDoc: await hostedDidDocument(deps, params.did) },
  }))
