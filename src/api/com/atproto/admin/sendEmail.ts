// com.atproto.admin.sendEmail: an operator's message to an account's address; a delivery failure
// is the call's error.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { accountByDid } from '#src/account/admin-views.js'
import { deliver } from '#src/mail/index.js'

export default method('com.atproto.admin.sendEmail', ({ db, mailer }) => async ({ input }) => {
  const { recipientDid, content, subject } = input.body
  const account = await accountByDid(db, recipientDid)
  if (!account.email) throw xrpcError('InvalidRequest', 'The account has no email address')
  await deliver(mailer, { to: account.email, subject: subject || 'A message from your PDS operator', text: content })
  return { encoding: 'application/json', body: { sent: true } }
})
