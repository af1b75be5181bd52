// com.atproto.server.requestPasswordReset: the same answer and the same work
// whether or not the address belongs to an account; delivery happens in the background and a
// failure is only logged, so nothing here reveals whether the account exists.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { issueEmailToken, newEmailToken } from '../../../../account/email-tokens.js'
import { passwordResetAccount } from '../../../../account/email.js'
import { resetPasswordMail } from '../../../../mail/templates.js'

export default (api: Server, { db, mailer, logger }: Pick<Services, 'db' | 'mailer' | 'logger'>) =>
  api.com.atproto.server.requestPasswordReset<AuthFor<'com.atproto.server.requestPasswordReset'>>(async ({ input }) => {
    const email = input.body.email.trim().toLowerCase()
    const account = await passwordResetAccount(db, email)
    const token = newEmailToken()
    if (!account) return
    await issueEmailToken(db, account.did, 'reset-password', { token })
    mailer.send({ to: account.email, ...resetPasswordMail(token, account.handle) }).catch((err: unknown) => {
      logger.warn({ reason: String((err as Error)?.message ?? err) }, 'password reset email not delivered')
    })
  })
