// com.atproto.server.confirmEmail: consumes the confirm-email token and marks the address
// confirmed; a miss or an expired token is 401 InvalidToken.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { consumeEmailToken } from '../../../../account/email-tokens.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.confirmEmail<AuthFor<'com.atproto.server.confirmEmail'>>(async ({ auth, input }) => {
    const { did, email } = auth.credentials.account
    // the official input names the address being confirmed: it must be the account's
    if (!email || input.body.email.trim().toLowerCase() !== email) {
      throw xrpcError('InvalidEmail', 'This is not the email address of the account')
    }
    await db.transaction().execute(async (trx) => {
      const hit = await consumeEmailToken(trx, did, 'confirm-email', input.body.token)
      if (!hit) throw xrpcError('InvalidToken', 'Token is invalid or expired', 401)
      await trx.updateTable('account').set({ email_confirmed_at: new Date().toISOString() }).where('did', '=', did).execute()
    })
  })
