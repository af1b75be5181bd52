// com.atproto.server.resetPassword: the reset-password token is looked up by purpose and value,
// without the DID; a miss or expiry is 400 InvalidToken. The account's access ends with the old
// password (sessions, OAuth grants, app passwords), so whoever stole one is out; the owner is told.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { resetPassword } from '../../../../account/passwords.js'

export default (api: Server, deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
  api.com.atproto.server.resetPassword<AuthFor<'com.atproto.server.resetPassword'>>(async ({ input }) => {
    await resetPassword(deps, input.body.token, input.body.password)
  })
