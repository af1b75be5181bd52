// com.atproto.server.requestAccountDelete: a delete-account token (1 hour) to the account's address.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { sendDeleteToken } from '../../../../account/email-requests.js'

export default (api: Server, deps: Pick<Services, 'db' | 'mailer'>) =>
  api.com.atproto.server.requestAccountDelete<AuthFor<'com.atproto.server.requestAccountDelete'>>(async ({ auth }) => {
    await sendDeleteToken(deps, auth.credentials.account)
  })
