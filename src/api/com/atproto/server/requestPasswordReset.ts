// com.atproto.server.requestPasswordReset: nothing in the answer says whether the address
// belongs to an account (account/password-reset.ts).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { requestPasswordReset } from '../../../../account/password-reset.js'

export default (api: Server, deps: Pick<Services, 'db' | 'mailer' | 'logger'>) =>
  api.com.atproto.server.requestPasswordReset<AuthFor<'com.atproto.server.requestPasswordReset'>>(async ({ input }) => {
    await requestPasswordReset(deps, input.body.email)
  })
