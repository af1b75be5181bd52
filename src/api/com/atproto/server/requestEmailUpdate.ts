// com.atproto.server.requestEmailUpdate, both flows (the optional `email` input is this server's
// addition). With `email`: the token carries the new address; it goes to the current address when
// that one is confirmed (whoever holds the address on file approves the change), else to the new
// one. Without: the official flow, a token to the current address when it is confirmed
// (`tokenRequired`), nothing otherwise.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { requestEmailChange, sendEmailUpdateToken } from '#src/account/email-requests.js'

export default method('com.atproto.server.requestEmailUpdate', (deps: Pick<Services, 'db' | 'mailer'>) => async ({ auth, input }) => {
  const { account } = auth.credentials
  const wanted = input.body?.email
  const tokenRequired =
    wanted !== undefined ? (await requestEmailChange(deps, account, wanted), true) : await sendEmailUpdateToken(deps, account)
  return { encoding: 'application/json', body: { tokenRequired } }
})
