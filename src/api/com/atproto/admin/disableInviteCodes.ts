// com.atproto.admin.disableInviteCodes: the given codes, and every code the given accounts own,
// stop being honoured at sign-up. The operator's own codes are disabled one by one, never at once.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { ADMIN_ACCOUNT, disableInviteCodes } from '../../../../account/invites.js'
import { xrpcError } from '../../../../errors.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.disableInviteCodes<AuthFor<'com.atproto.admin.disableInviteCodes'>>(async ({ input }) => {
    const codes = input.body.codes ?? []
    const accounts = input.body.accounts ?? []
    if (accounts.includes(ADMIN_ACCOUNT)) throw xrpcError('InvalidRequest', "The operator's codes are disabled by code, not all at once")
    await disableInviteCodes(db, { codes, accounts })
  })
