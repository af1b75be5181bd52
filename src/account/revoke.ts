// Every credential an account signs in with, revoked at once (an operator's response to a
// compromised account): every session and OAuth grant (live access tokens included), pending
// OAuth codes, app passwords, and the password itself, replaced by a random one nobody knows. A
// password reset gives it back.
import { randomBytes } from 'node:crypto'
import { hashPassword } from './password.js'
import type { Store } from '../db/schema.js'
import type { Db } from '../db/index.js'
import { endAllSessions } from '../auth/revocation.js'

export async function revokeAccountCredentials(db: Db, did: string) {
  const unusable = await hashPassword(randomBytes(32).toString('base64url'))
  await db.transaction().execute(async (trx: Store) => {
    await endAllSessions(trx, did)
    await trx.deleteFrom('app_password').where('did', '=', did).execute()
    await trx.updateTable('account').set({ password_hash: unusable }).where('did', '=', did).execute()
  })
}
