// com.atproto.identity.requestPlcOperationSignature: a plc-operation-signature token (15 minutes)
// to the account's address; the answer is an empty JSON object.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { issueEmailToken } from '../../../../account/email-tokens.js'
import { deliver } from '../../../../mail/index.js'
import { plcOperationMail } from '../../../../mail/templates.js'
import { emptyObject } from '../../../json-text.js'

export default (api: Server, { db, mailer }: Pick<Services, 'db' | 'mailer'>) =>
  api.com.atproto.identity.requestPlcOperationSignature<AuthFor<'com.atproto.identity.requestPlcOperationSignature'>>(async ({ auth }) => {
    const { did, handle, email } = auth.credentials.account
    if (!email) throw xrpcError('InvalidRequest', 'This account has no email address')
    const token = await issueEmailToken(db, did, 'plc-operation-signature')
    await deliver(mailer, { to: email, ...plcOperationMail(token, handle) })
    return emptyObject()
  })
