// com.atproto.server.createInviteCodes (admin): `codeCount` codes for each account named (or for
// the operator's own pool when none is).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { ADMIN_ACCOUNT, createInviteCodes } from '../../../../account/invites.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.server.createInviteCodes<AuthFor<'com.atproto.server.createInviteCodes'>>(async ({ input }) => {
    const { codeCount, useCount, forAccounts } = input.body
    const accounts = forAccounts?.length ? forAccounts : [ADMIN_ACCOUNT]
    if (accounts.length > 100) throw xrpcError('InvalidRequest', 'At most 100 accounts per call')
    const codes = await db.transaction().execute(async (trx) => {
      const out: { account: string; codes: string[] }[] = []
      for (const account of accounts) {
        const forAccount = account === ADMIN_ACCOUNT ? undefined : account
        out.push({ account, codes: await createInviteCodes(trx, { hostname: config.hostname, useCount, forAccount, count: codeCount }) })
      }
      return out
    })
    return { encoding: 'application/json', body: { codes } }
  })
