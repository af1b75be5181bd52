// com.atproto.admin.disableInviteCodes: the given codes, and every code the given accounts own,
// stop being honoured at sign-up. The operator's own codes are disabled one by one, never at once.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { ADMIN_ACCOUNT } from '../../../../account/invites.js'
import { xrpcError } from '../../../../errors.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.disableInviteCodes<AuthFor<'com.atproto.admin.disableInviteCodes'>>(async ({ input }) => {
    const codes = input.body.codes ?? []
    const accounts = input.body.accounts ?? []
    if (accounts.includes(ADMIN_ACCOUNT)) throw xrpcError('InvalidRequest', 'The operator\'s codes are disabled by code, not all at once')
    await db.transaction().execute(async (trx) => {
      if (codes.length) await trx.updateTable('invite_code').set({ disabled: 1 }).where('code', 'in', codes).execute()
      if (accounts.length) await trx.updateTable('invite_code').set({ disabled: 1 }).where('for_account', 'in', accounts).execute()
    })
  })
