// A forgotten password, for requestPasswordReset/resetPassword and the sign-in page alike: the
// same answer and the same work whether or not the address belongs to an account (delivery
// happens in the background and a failure is only logged), and a new password ends every session.
import type { Db } from '../db/index.js'
import type { Logger } from '../logger.js'
import type { Mailer } from '../mail/index.js'
import { xrpcError } from '../errors.js'
import { resetPasswordMail } from '../mail/templates.js'
import { passwordResetAccount } from './email.js'
import { issueEmailToken, newEmailToken } from './email-tokens.js'
import { hashPassword, MAX_PASSWORD_LENGTH } from './password.js'
import { resetPasswordHash } from './passwords.js'

export const MIN_PASSWORD_LENGTH = 8

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

/** a bad length is refused before the token is looked at, so it does not burn the token */
export async function resetPassword(db: Db, token: string, password: string): Promise<void> {
  if (password.length < MIN_PASSWORD_LENGTH) throw xrpcError('InvalidPassword', `Passwords are at least ${MIN_PASSWORD_LENGTH} characters`)
  if (password.length > MAX_PASSWORD_LENGTH) throw xrpcError('InvalidPassword', `Passwords are at most ${MAX_PASSWORD_LENGTH} characters`)
  await resetPasswordHash(db, token, await hashPassword(password))
}
