// com.atproto.identity.refreshIdentity: resolveIdentity with every cached document fetched again,
// so the next lookup (proxying included) sees the new state.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { resolveIdentity } from '../../../../identity/identity.js'

export default (api: Server, deps: Pick<Services, 'db' | 'config' | 'didResolver' | 'outbound'>) =>
  api.com.atproto.identity.refreshIdentity<AuthFor<'com.atproto.identity.refreshIdentity'>>(async ({ input }) => ({
    encoding: 'application/json',
    body: await resolveIdentity(deps, input.body.identifier, { fresh: true }),
  }))
