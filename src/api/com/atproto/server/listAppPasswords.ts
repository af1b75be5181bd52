// com.atproto.server.listAppPasswords: names, dates and flags; never a secret.
import { method } from '#src/api/method.js'
import { listAppPasswords } from '#src/account/app-passwords.js'

export default method('com.atproto.server.listAppPasswords', ({ db }) => async ({ auth }) => ({
  encoding: 'application/json',
  body: { passwords: await listAppPasswords(db, auth.credentials.did) },
}))
