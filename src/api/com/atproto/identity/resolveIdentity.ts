// com.atproto.identity.resolveIdentity: DID, bidirectionally verified handle and DID document of a
// handle or DID (identity/identity.ts).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { resolveIdentity } from '../../../../identity/identity.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config' | 'didResolver' | 'outbound'>) =>
  api.com.atproto.identity.resolveIdentity<AuthFor<'com.atproto.identity.resolveIdentity'>>(async ({ params }) => ({
    encoding: 'application/json',
    body: await resolveIdentity(deps, params.identifier),
  }))
