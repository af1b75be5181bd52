// com.atproto.admin.disableInviteCodes: the given codes, and every code the given accounts own,
// stop being honoured at sign-up. The operator's own codes are disabled one by one, never at once.
import { method } from '#src/api/method.js'
import { ADMIN_ACCOUNT, disableInviteCodes } from '#src/account/invites.js'
import { xrpcError } from '#src/errors.js'

export default method('com.atproto.admin.disableInviteCodes', ({ db }) => async ({ input }) => {
  const codes = input.body.codes ?? []
  const accounts = input.body.accounts ?? []
  if (accounts.includes(ADMIN_ACCOUNT)) throw xrpcError('InvalidRequest', "The operator's codes are disabled by code, not all at once")
  await disableInviteCodes(db, { codes, accounts })
})
