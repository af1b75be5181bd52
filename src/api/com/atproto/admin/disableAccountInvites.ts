// com.atproto.admin.disableAccountInvites: the account's codes stop being honoured at sign-up; the note is kept.
import { method } from '#src/api/method.js'
import { accountByDid } from '#src/account/admin-views.js'
import { setAccountInvitesDisabled } from '#src/account/invites.js'

export default method('com.atproto.admin.disableAccountInvites', ({ db }) => async ({ input }) => {
  const { account, note } = input.body
  await accountByDid(db, account)
  await setAccountInvitesDisabled(db, account, true, note)
})
