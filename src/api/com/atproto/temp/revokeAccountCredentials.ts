// com.atproto.temp.revokeAccountCredentials: the operator (or Ozone, with the admin password) signs
// an account out everywhere and locks its password and app passwords until a password reset.
import { method } from '#src/api/method.js'
import { revokeAccountCredentials } from '#src/account/revoke.js'
import { xrpcError } from '#src/errors.js'
import { findRepoAccount } from '#src/repo/read.js'

export default method('com.atproto.temp.revokeAccountCredentials', ({ db }) => async ({ input }) => {
  const account = await findRepoAccount(db, input.body.account)
  if (!account) throw xrpcError('NotFound', 'Account not found')
  await revokeAccountCredentials(db, account.did)
})
