// com.atproto.server.requestAccountDelete: a delete-account token (1 hour) to the account's address.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { sendDeleteToken } from '#src/account/email-requests.js'

export default method('com.atproto.server.requestAccountDelete', (deps: Pick<Services, 'db' | 'mailer'>) => async ({ auth }) => {
  await sendDeleteToken(deps, auth.credentials.account)
})
