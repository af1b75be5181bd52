// A forgotten password, for requestPasswordReset/resetPassword and the sign-in pages alike: the
// same answer and the same work whether or not the address belongs to an account (delivery
// happens in the background and a failure is only logged), and a new password ends the account's
// access (sessions, grants, app passwords; see passwords.ts).
import type { Db } from '../db/index.js'
import type { Logger } from '../logger.js'
import type { Mailer } from '../mail/index.js'
import { resetPasswordMail } from '../mail/templates.js'
import { passwordResetAccount } from './email.js'
import { issueEmailToken, newEmailToken } from './email-tokens.js'

export { MIN_PASSWORD_LENGTH, resetPassword } from './passwords.js'

export async function requestPasswordReset(deps: { db: Db; mailer: Mailer; logger: Logger }, rawEmail: string): Promise<void> {
  const email = rawEmail.trim().toLowerCase()
  const account = await passwordResetAccount(deps.db, email)
  const token = newEmailToken()
  if (!account) return
  await issueEmailToken(deps.db, account.did, 'reset-password', { token })
  deps.mailer.send({ to: account.email, ...resetPasswordMail(token, account.handle) }).catch((err: unknown) => {
    deps.logger.warn({ reason: String((err as Error)?.message ?? err) }, 'password reset email not delivered')
  })
}
