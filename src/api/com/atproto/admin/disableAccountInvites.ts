// com.atproto.admin.disableAccountInvites: the account's codes stop being honoured at sign-up; the note is kept.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { accountByDid } from '../../../../account/admin-views.js'
import { setAccountInvitesDisabled } from '../../../../account/invites.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.disableAccountInvites<AuthFor<'com.atproto.admin.disableAccountInvites'>>(async ({ input }) => {
    const { account, note } = input.body
    await accountByDid(db, account)
    await setAccountInvitesDisabled(db, account, true, note)
  })
