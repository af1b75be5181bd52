// com.atproto.server.getAccountInviteCodes: the codes the operator created for this account.
// Codes are never earned over time on this server, so `createAvailable` has nothing to create.
import { method } from '#src/api/method.js'
import { inviteCodeViews } from '#src/account/invites.js'

export default method('com.atproto.server.getAccountInviteCodes', ({ db }) => async ({ auth, params }) => {
  let codes = await inviteCodeViews(db, { forAccount: auth.credentials.did })
  if (params.includeUsed === false) codes = codes.filter((c) => c.uses.length < c.available && !c.disabled)
  return { encoding: 'application/json', body: { codes } }
})
