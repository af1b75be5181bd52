// com.atproto.server.confirmEmail: consumes the confirm-email token and marks the address
// confirmed; a miss or an expired token is 401 InvalidToken.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { confirmEmail } from '../../../../account/email.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.confirmEmail<AuthFor<'com.atproto.server.confirmEmail'>>(async ({ auth, input }) => {
    const { did, email } = auth.credentials.account
    // the official input names the address being confirmed: it must be the account's
    if (!email || input.body.email.trim().toLowerCase() !== email) {
      throw xrpcError('InvalidEmail', 'This is not the email address of the account')
    }
    await confirmEmail(db, did, input.body.token)
  })
