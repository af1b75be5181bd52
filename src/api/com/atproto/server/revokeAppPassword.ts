// com.atproto.server.revokeAppPassword: idempotent; revoking an unknown name is not an error.
import { method } from '#src/api/method.js'
import { revokeAppPassword } from '#src/account/app-passwords.js'

export default method('com.atproto.server.revokeAppPassword', ({ db }) => async ({ auth, input }) => {
  await revokeAppPassword(db, auth.credentials.did, input.body.name)
})
