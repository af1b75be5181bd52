// Every credential an account signs in with, revoked at once (an operator's response to a
// compromised account): everything endAccess ends, passkeys, the authenticator app and recovery
// codes included, and the password itself, replaced by a random one nobody knows. A password
// reset gives it back; the owner then enrols second factors again.
import { randomBytes } from 'node:crypto'
import { hashPassword } from './password.js'
import type { Store } from '../db/schema.js'
import type { Db } from '../db/index.js'
import { endAccess } from './end-access.js'

export async function revokeAccountCredentials(db: Db, did: string) {
  const unusable = await hashPassword(randomBytes(32).toString('base64url'))
  await db.transact(async (trx: Store) => {
    await trx.updateTable('account').set({ password_hash: unusable }).where('did', '=', did).execute()
    await endAccess(trx, did, 'revoke')
  })
}
