// com.atproto.server.requestEmailConfirmation: a confirm-email token to the current address; an
// address already confirmed is a 200 with nothing sent.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { sendEmailConfirmation } from '#src/account/email-requests.js'

export default method('com.atproto.server.requestEmailConfirmation', (deps: Pick<Services, 'db' | 'mailer'>) => async ({ auth }) => {
  await sendEmailConfirmation(deps, auth.credentials.account)
})
