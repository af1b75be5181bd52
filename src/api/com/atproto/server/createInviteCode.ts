// com.atproto.server.createInviteCode (admin): one code with `useCount` uses.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { createInviteCodes } from '../../../../account/invites.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.server.createInviteCode<AuthFor<'com.atproto.server.createInviteCode'>>(async ({ input }) => {
    const [code] = await createInviteCodes(db, {
      hostname: config.hostname,
      useCount: input.body.useCount,
      forAccount: input.body.forAccount,
    })
    return { encoding: 'application/json', body: { code } }
  })
