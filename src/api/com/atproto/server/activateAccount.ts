// com.atproto.server.activateAccount: deactivated → active with an `#account` event; an active
// account gets 200 and nothing happens. An account that moved in goes live only while its DID
// document sends the DID here, so this server never answers for a DID that points elsewhere.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { activate } from '../../../../account/lifecycle.js'
import { checkDocNamesUs } from '../../../../migration/did-control.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.server.activateAccount<AuthFor<'com.atproto.server.activateAccount'>>(async ({ auth }) => {
    const { did, account } = auth.credentials
    if (account.status === 'deactivated' && account.migration_state === 'migrating-in') {
      await checkDocNamesUs({ db, config }, did)
    }
    await activate(db, did)
  })
