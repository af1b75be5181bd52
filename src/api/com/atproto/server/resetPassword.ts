// com.atproto.server.resetPassword: the reset-password token is looked up by purpose and value,
// without the DID; a miss or expiry is 400 InvalidToken. Every session and OAuth grant of the
// account ends with the old password, so whoever stole one is out.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { resetPassword } from '../../../../account/password-reset.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.resetPassword<AuthFor<'com.atproto.server.resetPassword'>>(async ({ input }) => {
    await resetPassword(db, input.body.token, input.body.password)
  })
