// com.atproto.server.resetPassword: the reset-password token is looked up by purpose and value,
// without the DID; a miss or expiry is 400 InvalidToken. The account's access ends with the old
// password (sessions, OAuth grants, app passwords), so whoever stole one is out; the owner is told.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { resetPassword } from '#src/account/password.js'

export default method(
  'com.atproto.server.resetPassword',
  (deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
    async ({ input }) => {
      await resetPassword(deps, input.body.token, input.body.password)
    },
)
