// com.atproto.server.updateEmail: with a token, the update-email token is consumed and the address
// it carries is applied (the flow of requestEmailUpdate's `email` input; an `email` field is
// tolerated and the token trusted), or for a token issued without one, the given address. Without a
// token: only while the current address is unconfirmed (the official flow). The new address is
// unconfirmed (and email sign-in codes go off with the old one); one in use is EmailNotAvailable
// and leaves the token in place. `emailAuthFactor` with the current address switches sign-in codes
// (the official flow: requestEmailUpdate's token, then the same address with the flag). Either
// change is mailed to the address the account had.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { xrpcError } from '#src/errors.js'
import { changeEmail } from '#src/account/email.js'

export default method(
  'com.atproto.server.updateEmail',
  (deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
    async ({ auth, input }) => {
      const { did, email_confirmed_at } = auth.credentials.account
      const { token, email, emailAuthFactor } = input.body
      if (!token && email_confirmed_at) throw xrpcError('TokenRequired', 'Confirmed addresses change with a token from requestEmailUpdate')
      await changeEmail(deps, did, { token, email, emailAuthFactor })
    },
)
