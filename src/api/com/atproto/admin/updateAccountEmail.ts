// com.atproto.admin.updateAccountEmail: sets the address, which then counts as unconfirmed; the
// account's pending email tokens are dropped since they were sent to the old one, which is told.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { checkEmail } from '../../../../account/handles.js'
import { xrpcError } from '../../../../errors.js'
import { findRepoAccount } from '../../../../repo/read.js'
import { setEmail } from '../../../../account/email.js'

export default (api: Server, deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
  api.com.atproto.admin.updateAccountEmail<AuthFor<'com.atproto.admin.updateAccountEmail'>>(async ({ input }) => {
    const email = checkEmail(input.body.email)
    const account = await findRepoAccount(deps.db, input.body.account)
    if (!account) throw xrpcError('NotFound', 'Account not found')
    await setEmail(deps, account.did, email)
  })
