// com.atproto.admin.updateAccountEmail: sets the address, which then counts as unconfirmed; the
// account's pending email tokens are dropped since they were sent to the old one, which is told.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { checkEmail } from '#src/account/handles.js'
import { xrpcError } from '#src/errors.js'
import { findRepoAccount } from '#src/repo/read.js'
import { setEmail } from '#src/account/email.js'

export default method(
  'com.atproto.admin.updateAccountEmail',
  (deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
    async ({ input }) => {
      const email = checkEmail(input.body.email)
      const account = await findRepoAccount(deps.db, input.body.account)
      if (!account) throw xrpcError('NotFound', 'Account not found')
      await setEmail(deps, account.did, email)
    },
)
