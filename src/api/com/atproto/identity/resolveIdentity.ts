// com.atproto.identity.resolveIdentity: DID, bidirectionally verified handle and DID document of a
// handle or DID (identity/identity.ts).
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { resolveIdentity } from '#src/identity/identity.js'

export default method(
  'com.atproto.identity.resolveIdentity',
  (deps: Pick<Services, 'db' | 'config' | 'didResolver' | 'outbound'>) =>
    async ({ params }) => ({
      encoding: 'application/json',
      body: await resolveIdentity(deps, params.identifier),
    }),
)
