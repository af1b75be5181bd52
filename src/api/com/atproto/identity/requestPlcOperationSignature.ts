// com.atproto.identity.requestPlcOperationSignature: a plc-operation-signature token (15 minutes)
// to the account's address; the answer is an empty JSON object.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { issueEmailToken } from '#src/account/email-tokens.js'
import { deliver } from '#src/mail/index.js'
import { plcOperationMail } from '#src/mail/templates.js'
import { emptyObject } from '#src/api/json-text.js'

export default method('com.atproto.identity.requestPlcOperationSignature', ({ db, mailer }) => async ({ auth }) => {
  const { did, handle, email } = auth.credentials.account
  if (!email) throw xrpcError('InvalidRequest', 'This account has no email address')
  const token = await issueEmailToken(db, did, 'plc-operation-signature')
  await deliver(mailer, { to: email, ...plcOperationMail(token, handle) })
  return emptyObject()
})
