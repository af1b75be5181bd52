// com.atproto.server.requestEmailConfirmation: a confirm-email token to the current address; an
// address already confirmed is a 200 with nothing sent.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { issueEmailToken } from '../../../../account/email-tokens.js'
import { deliver } from '../../../../mail/index.js'
import { confirmEmailMail } from '../../../../mail/templates.js'

export default (api: Server, { db, mailer }: Pick<Services, 'db' | 'mailer'>) =>
  api.com.atproto.server.requestEmailConfirmation<AuthFor<'com.atproto.server.requestEmailConfirmation'>>(async ({ auth }) => {
    const { did, handle, email, email_confirmed_at } = auth.credentials.account
    if (email_confirmed_at) return
    if (!email) throw xrpcError('InvalidRequest', 'This account has no email address')
    const token = await issueEmailToken(db, did, 'confirm-email')
    await deliver(mailer, { to: email, ...confirmEmailMail(token, handle) })
  })
