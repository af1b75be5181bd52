// com.atproto.server.confirmEmail: consumes the confirm-email token and marks the address
// confirmed; a miss or an expired token is 401 InvalidToken.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { confirmEmail } from '#src/account/email.js'

export default method('com.atproto.server.confirmEmail', ({ db }) => async ({ auth, input }) => {
  const { did, email } = auth.credentials.account
  // the official input names the address being confirmed: it must be the account's
  if (!email || input.body.email.trim().toLowerCase() !== email) {
    throw xrpcError('InvalidEmail', 'This is not the email address of the account')
  }
  await confirmEmail(db, did, input.body.token)
})
