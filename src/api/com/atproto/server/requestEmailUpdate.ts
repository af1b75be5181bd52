// com.atproto.server.requestEmailUpdate, both flows (the optional `email` input is this server's
// addition). With `email`: the token carries the new address; it goes to the current address when
// that one is confirmed (whoever holds the address on file approves the change), else to the new
// one. Without: the official flow, a token to the current address when it is confirmed
// (`tokenRequired`), nothing otherwise.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { checkEmail } from '../../../../account/handles.js'
import { issueEmailToken } from '../../../../account/email-tokens.js'
import { deliver } from '../../../../mail/index.js'
import { updateEmailMail } from '../../../../mail/templates.js'

export default (api: Server, { db, mailer }: Pick<Services, 'db' | 'mailer'>) =>
  api.com.atproto.server.requestEmailUpdate<AuthFor<'com.atproto.server.requestEmailUpdate'>>(async ({ auth, input }) => {
    const { did, handle, email, email_confirmed_at } = auth.credentials.account
    const wanted = input.body?.email
    if (wanted !== undefined) {
      const newEmail = checkEmail(wanted)
      const token = await issueEmailToken(db, did, 'update-email', { newEmail })
      const to = email && email_confirmed_at ? email : newEmail
      await deliver(mailer, { to, ...updateEmailMail(token, handle, newEmail) })
      return { encoding: 'application/json', body: { tokenRequired: true } }
    }
    if (!email_confirmed_at) return { encoding: 'application/json', body: { tokenRequired: false } }
    if (!email) throw xrpcError('InvalidRequest', 'This account has no email address')
    const token = await issueEmailToken(db, did, 'update-email')
    await deliver(mailer, { to: email, ...updateEmailMail(token, handle) })
    return { encoding: 'application/json', body: { tokenRequired: true } }
  })
