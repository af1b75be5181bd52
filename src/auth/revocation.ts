// Ending sessions at once. Access tokens are never stored, so each names the account's credential
// generation (and, from an app password, which one); the account row the verifier reads on every
// request says which are still good. No lookup is added to an authenticated request.
import type { Db } from '../db/index.js'
import type { Store } from '../db/schema.js'
import { lockingRead } from '../db/dialect.js'
import { ACCESS_TTL_S } from './session-tokens.js'

/** what of an account row decides whether a token still stands */
export type RevocationState = { credential_gen: number; revoked_app_passwords: string | null }
/** which app password a session came from: its name and when it was created */
export type AppPasswordRef = { name: string; at?: string }

type Revoked = { n: string; c: string; u: number }

/** a password change: every session, OAuth grant and unexchanged authorization code of the
 *  account ends, and access tokens minted before it stop working */
export async function endAllSessions(trx: Store, did: string): Promise<void> {
  await trx
    .updateTable('account')
    .set((eb) => ({ credential_gen: eb('credential_gen', '+', 1) }))
    .where('did', '=', did)
    .execute()
  await trx.deleteFrom('refresh_token').where('did', '=', did).execute()
  await trx.deleteFrom('oauth_code').where('did', '=', did).execute()
  // a browser that stayed signed in on the server's pages is signed out as well
  await trx.deleteFrom('device_account').where('did', '=', did).execute()
}

/** a revoked app password: its sessions end, and its live access tokens with them */
export async function endAppPasswordSessions(db: Db, did: string, name: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    // concurrent revocations queue on the account row, so none loses the other's entry
    const row = await lockingRead(
      db.dialect,
      trx.selectFrom('account').select('revoked_app_passwords').where('did', '=', did),
    ).executeTakeFirst()
    if (!row) return
    const gone = await trx
      .deleteFrom('app_password')
      .where('did', '=', did)
      .where('name', '=', name)
      .returning('created_at')
      .executeTakeFirst()
    await trx
      .deleteFrom('refresh_token')
      .where('did', '=', did)
      .where('kind', '=', 'session')
      .where('app_password_name', '=', name)
      .execute()
    if (!gone) return
    const now = Math.floor(Date.now() / 1000)
    // an entry is needed only while an access token minted before it could still be presented
    const kept = parse(row.revoked_app_passwords).filter((e) => e.u > now)
    kept.push({ n: name, c: gone.created_at, u: now + ACCESS_TTL_S + 60 })
    await trx
      .updateTable('account')
      .set({ revoked_app_passwords: JSON.stringify(kept) })
      .where('did', '=', did)
      .execute()
  })
}

/** true when a token of generation `gen` (from app password `appPassword`) no longer stands */
export function isRevoked(account: RevocationState, gen: unknown, appPassword?: AppPasswordRef): boolean {
  if ((typeof gen === 'number' ? gen : 0) !== account.credential_gen) return true
  if (!appPassword || !account.revoked_app_passwords) return false
  // a token from before app passwords were told apart by creation time matches by name
  return parse(account.revoked_app_passwords).some(
    (e) => e.n === appPassword.name && (appPassword.at === undefined || e.c === appPassword.at),
  )
}

// the column's few distinct values are parsed once each
const parsed = new Map<string, Revoked[]>()
function parse(text: string | null): readonly Revoked[] {
  if (!text) return []
  let list = parsed.get(text)
  if (!list) {
    try {
      const v = JSON.parse(text)
      list = Array.isArray(v) ? (v as Revoked[]) : []
    } catch {
      list = []
    }
    if (parsed.size >= 1024) parsed.delete(parsed.keys().next().value as string)
    parsed.set(text, list)
  }
  return list
}
