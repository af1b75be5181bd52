// Setting an account's main password, by the operator or with a reset token. Either way every
// session and OAuth grant of the account ends, so whoever held one with the old password is out.
import type { Db } from '../db/index.js'
import { endAllSessions } from '../auth/revocation.js'
import { xrpcError } from '../errors.js'
import { consumeEmailTokenByValue } from './email-tokens.js'

/** sets the password hash of `did` and ends its sessions */
export async function setPasswordHash(db: Db, did: string, hash: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('account').set({ password_hash: hash }).where('did', '=', did).execute()
    await endAllSessions(trx, did)
  })
}

/** consumes the reset-password token (found by value alone) and sets `hash`; a miss is 400 InvalidToken */
export async function resetPasswordHash(db: Db, token: string, hash: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const hit = await consumeEmailTokenByValue(trx, 'reset-password', token)
    if (!hit) throw xrpcError('InvalidToken', 'Token is invalid or expired', 400)
    await trx.updateTable('account').set({ password_hash: hash }).where('did', '=', hit.did).execute()
    await endAllSessions(trx, hit.did)
  })
}
