// com.atproto.temp.revokeAccountCredentials: the operator (or Ozone, with the admin password) signs
// an account out everywhere and locks its password and app passwords until a password reset.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { revokeAccountCredentials } from '../../../../account/revoke.js'
import { xrpcError } from '../../../../errors.js'
import { findRepoAccount } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.temp.revokeAccountCredentials<AuthFor<'com.atproto.temp.revokeAccountCredentials'>>(async ({ input }) => {
    const account = await findRepoAccount(db, input.body.account)
    if (!account) throw xrpcError('NotFound', 'Account not found')
    await revokeAccountCredentials(db, account.did)
  })
