// com.atproto.server.activateAccount: deactivated → active with an `#account` event; an active
// account gets 200 and nothing happens.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AccessAuth } from '../../../../auth/verifier.js'
import { activate } from '../../../../account/lifecycle.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.activateAccount<AccessAuth>(async ({ auth }) => {
    await activate(db, auth.credentials.did)
  })
