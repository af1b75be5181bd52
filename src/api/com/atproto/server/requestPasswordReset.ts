// com.atproto.server.requestPasswordReset: nothing in the answer says whether the address
// belongs to an account (account/password.ts).
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { requestPasswordReset } from '#src/account/password.js'

export default method(
  'com.atproto.server.requestPasswordReset',
  (deps: Pick<Services, 'db' | 'mailer' | 'logger'>) =>
    async ({ input }) => {
      await requestPasswordReset(deps, input.body.email)
    },
)
