// com.atproto.server.checkAccountStatus: this server's added fields and the official ones.
import { method } from '#src/api/method.js'
import { mayReadEmail } from '#src/auth/verifier.js'
import { accountStatus } from '#src/account/status.js'

export default method('com.atproto.server.checkAccountStatus', ({ db, config }) => async ({ auth }) => ({
  encoding: 'application/json',
  body: await accountStatus(db, auth.credentials.account, config.publicUrl, mayReadEmail(auth.credentials)),
}))
