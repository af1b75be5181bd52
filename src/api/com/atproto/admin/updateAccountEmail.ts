// com.atproto.admin.updateAccountEmail: sets the address, which then counts as unconfirmed; the
// account's pending email tokens are dropped since they were sent to the old one.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { checkEmail } from '../../../../account/handles.js'
import { isUniqueViolation } from '../../../../db/index.js'
import { xrpcError } from '../../../../errors.js'
import { findRepoAccount } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.updateAccountEmail<AuthFor<'com.atproto.admin.updateAccountEmail'>>(async ({ input }) => {
    const email = checkEmail(input.body.email)
    const account = await findRepoAccount(db, input.body.account)
    if (!account) throw xrpcError('NotFound', 'Account not found')
    const taken = await db.selectFrom('account').select('did').where('email', '=', email).executeTakeFirst()
    if (taken && taken.did !== account.did) throw xrpcError('EmailNotAvailable', 'This email address is already in use')
    try {
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('account').set({ email, email_confirmed_at: null }).where('did', '=', account.did).execute()
        await trx.deleteFrom('email_token').where('did', '=', account.did).execute()
      })
    } catch (err) {
      if (isUniqueViolation(err, 'account_email_uq')) throw xrpcError('EmailNotAvailable', 'This email address is already in use')
      throw err
    }
  })
