// com.atproto.server.getAccountInviteCodes: the codes the operator created for this account.
// Codes are never earned over time on this server, so `createAvailable` has nothing to create.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { inviteCodeViews } from '../../../../account/invites.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.getAccountInviteCodes<AuthFor<'com.atproto.server.getAccountInviteCodes'>>(async ({ auth, params }) => {
    let codes = await inviteCodeViews(db, { forAccount: auth.credentials.did })
    if (params.includeUsed === false) codes = codes.filter((c) => c.uses.length < c.available && !c.disabled)
    return { encoding: 'application/json', body: { codes } }
  })
