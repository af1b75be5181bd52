// com.atproto.server.requestAccountDelete: a delete-account token (1 hour) to the account's address.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { issueEmailToken } from '../../../../account/email-tokens.js'
import { deliver } from '../../../../mail/index.js'
import { deleteAccountMail } from '../../../../mail/templates.js'

export default (api: Server, { db, mailer }: Pick<Services, 'db' | 'mailer'>) =>
  api.com.atproto.server.requestAccountDelete<AuthFor<'com.atproto.server.requestAccountDelete'>>(async ({ auth }) => {
    const { did, handle, email } = auth.credentials.account
    if (!email) throw xrpcError('InvalidRequest', 'This account has no email address')
    const token = await issueEmailToken(db, did, 'delete-account')
    await deliver(mailer, { to: email, ...deleteAccountMail(token, handle) })
  })
