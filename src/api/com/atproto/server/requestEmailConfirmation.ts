// com.atproto.server.requestEmailConfirmation: a confirm-email token to the current address; an
// address already confirmed is a 200 with nothing sent.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { sendEmailConfirmation } from '../../../../account/email-requests.js'

export default (api: Server, deps: Pick<Services, 'db' | 'mailer'>) =>
  api.com.atproto.server.requestEmailConfirmation<AuthFor<'com.atproto.server.requestEmailConfirmation'>>(async ({ auth }) => {
    await sendEmailConfirmation(deps, auth.credentials.account)
  })
