// Setting an account's main password: by the owner (the account page, knowing the current one),
// with a reset code, or by the operator. Every way ends the account's access (endAccess): whoever
// held a session, a grant or an app password from before the change is out. The owner is told.
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { consumeEmailTokenByValue } from './email-tokens.js'
import { endAccess } from './end-access.js'
import { noticeCredentialChange, type NoticeDeps } from './notices.js'
import { hashPassword, MAX_PASSWORD_LENGTH } from './password.js'

export const MIN_PASSWORD_LENGTH = 8

export type PasswordDeps = NoticeDeps & { db: Db }

/** a bad length is 400 InvalidPassword, refused before anything else is looked at */
export function checkPasswordLength(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) throw xrpcError('InvalidPassword', `Passwords are at least ${MIN_PASSWORD_LENGTH} characters`)
  if (password.length > MAX_PASSWORD_LENGTH) throw xrpcError('InvalidPassword', `Passwords are at most ${MAX_PASSWORD_LENGTH} characters`)
}

/** sets the main password of `did` (the owner's change or the operator's) and ends its access */
export async function changePassword(deps: PasswordDeps, did: string, password: string, by: 'owner' | 'operator'): Promise<void> {
  checkPasswordLength(password)
  const hash = await hashPassword(password)
  await deps.db.transact(async (trx) => {
    await trx.updateTable('account').set({ password_hash: hash }).where('did', '=', did).execute()
    await endAccess(trx, did, 'password')
  })
  await noticeCredentialChange(deps, did, { kind: 'password', by })
}

/**
 * consumes the reset-password token (found by value alone) and sets the password; a miss is 400
 * InvalidToken, and a bad length is refused before the token is looked at, so it does not burn it
 */
export async function resetPassword(deps: PasswordDeps, token: string, password: string): Promise<void> {
  checkPasswordLength(password)
  const hash = await hashPassword(password)
  const did = await deps.db.transact(async (trx) => {
    const hit = await consumeEmailTokenByValue(trx, 'reset-password', token)
    if (!hit) throw xrpcError('InvalidToken', 'Token is invalid or expired', 400)
    await trx.updateTable('account').set({ password_hash: hash }).where('did', '=', hit.did).execute()
    await endAccess(trx, hit.did, 'password')
    return hit.did
  })
  await noticeCredentialChange(deps, did, { kind: 'password', by: 'reset' })
}
