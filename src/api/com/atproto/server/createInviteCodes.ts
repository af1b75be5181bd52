// com.atproto.server.createInviteCodes (admin): `codeCount` codes for each account named (or for
// the operator's own pool when none is).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { ADMIN_ACCOUNT, createInviteCodesFor } from '../../../../account/invites.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.server.createInviteCodes<AuthFor<'com.atproto.server.createInviteCodes'>>(async ({ input }) => {
    const { codeCount, useCount, forAccounts } = input.body
    const accounts = forAccounts?.length ? forAccounts : [ADMIN_ACCOUNT]
    if (accounts.length > 100) throw xrpcError('InvalidRequest', 'At most 100 accounts per call')
    const codes = await createInviteCodesFor(db, accounts, { hostname: config.hostname, useCount, count: codeCount })
    return { encoding: 'application/json', body: { codes } }
  })
