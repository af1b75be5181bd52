// com.atproto.server.activateAccount: deactivated → active with an `#account` event; an active
// account gets 200 and nothing happens. An account that moved in goes live only while its DID
// document sends the DID here, so this server never answers for a DID that points elsewhere.
import { method } from '#src/api/method.js'
import { activate } from '#src/account/lifecycle.js'
import { checkDocNamesUs } from '#src/identity/did-control.js'

export default method('com.atproto.server.activateAccount', ({ db, config }) => async ({ auth }) => {
  const { did, account } = auth.credentials
  if (account.status === 'deactivated' && account.migration_state === 'migrating-in') {
    await checkDocNamesUs({ db, config }, did)
  }
  await activate(db, did)
})
