// com.atproto.server.createInviteCode (admin): one code with `useCount` uses.
import { method } from '#src/api/method.js'
import { createInviteCodes } from '#src/account/invites.js'

export default method('com.atproto.server.createInviteCode', ({ db, config }) => async ({ input }) => {
  const [code] = await createInviteCodes(db, {
    hostname: config.hostname,
    useCount: input.body.useCount,
    forAccount: input.body.forAccount,
  })
  return { encoding: 'application/json', body: { code } }
})
