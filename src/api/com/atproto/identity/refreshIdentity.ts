// com.atproto.identity.refreshIdentity: resolveIdentity with every cached document fetched again,
// so the next lookup (proxying included) sees the new state.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { resolveIdentity } from '#src/identity/identity.js'

export default method(
  'com.atproto.identity.refreshIdentity',
  (deps: Pick<Services, 'db' | 'config' | 'didResolver' | 'outbound'>) =>
    async ({ input }) => ({
      encoding: 'application/json',
      body: await resolveIdentity(deps, input.body.identifier, { fresh: true }),
    }),
)
