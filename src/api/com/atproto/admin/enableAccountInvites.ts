// com.atproto.admin.enableAccountInvites: the account's codes are honoured again; the note is kept.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { accountByDid } from '../../../../account/admin-views.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.enableAccountInvites<AuthFor<'com.atproto.admin.enableAccountInvites'>>(async ({ input }) => {
    const { account, note } = input.body
    await accountByDid(db, account)
    await db
      .updateTable('account')
      .set({ invites_disabled: 0, ...(note !== undefined ? { invite_note: note } : {}) })
      .where('did', '=', account)
      .execute()
  })
