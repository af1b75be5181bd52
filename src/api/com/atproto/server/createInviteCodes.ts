// com.atproto.server.createInviteCodes (admin): `codeCount` codes for each account named (or for
// the operator's own pool when none is).
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { ADMIN_ACCOUNT, createInviteCodesFor } from '#src/account/invites.js'

export default method('com.atproto.server.createInviteCodes', ({ db, config }) => async ({ input }) => {
  const { codeCount, useCount, forAccounts } = input.body
  const accounts = forAccounts?.length ? forAccounts : [ADMIN_ACCOUNT]
  if (accounts.length > 100) throw xrpcError('InvalidRequest', 'At most 100 accounts per call')
  const codes = await createInviteCodesFor(db, accounts, { hostname: config.hostname, useCount, count: codeCount })
  return { encoding: 'application/json', body: { codes } }
})
