// com.atproto.server.deactivateAccount: active → deactivated with an `#account` event; refresh
// tokens stay valid. `deleteAfter` is accepted and ignored.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { deactivate } from '../../../../account/lifecycle.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.deactivateAccount<AuthFor<'com.atproto.server.deactivateAccount'>>(async ({ auth }) => {
    await deactivate(db, auth.credentials.did)
  })
