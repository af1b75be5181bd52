// com.atproto.admin.sendEmail: an operator's message to an account's address; a delivery failure
// is the call's error.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { accountByDid } from '../../../../account/admin-views.js'
import { deliver } from '../../../../mail/index.js'

export default (api: Server, { db, mailer }: Pick<Services, 'db' | 'mailer'>) =>
  api.com.atproto.admin.sendEmail<AuthFor<'com.atproto.admin.sendEmail'>>(async ({ input }) => {
    const { recipientDid, content, subject } = input.body
    const account = await accountByDid(db, recipientDid)
    if (!account.email) throw xrpcError('InvalidRequest', 'The account has no email address')
    await deliver(mailer, { to: account.email, subject: subject || 'A message from your PDS operator', text: content })
    return { encoding: 'application/json', body: { sent: true } }
  })
