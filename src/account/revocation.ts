// Ending sessions at once (all of an account's: src/account/end-access.ts; one app password's or
// one grant's: here). Access tokens are never stored, so each names the account's credential
// generation (and, from an app password, which one); the account row the verifier reads on every
// request says which are still good. No lookup is added to an authenticated request.
import type { Db } from '../db/index.js'
import type { Store } from '../db/schema.js'
import { lockingRead } from '../db/dialect.js'
import { ACCESS_TTL_S } from './session-tokens.js'

/** what of an account row decides whether a token still stands */
export type RevocationState = { credential_gen: number; revoked_app_passwords: string | null; revoked_grants?: string | null }
/** which app password a session came from: its name and when it was created */
export type AppPasswordRef = { name: string; at?: string }

type Revoked = { n: string; c: string; u: number }
/** an ended OAuth grant: its DPoP key, when it ended (s), until when the entry matters (s) */
type RevokedGrant = { k: string; t: number; u: number }
/** an OAuth access token's binding: its DPoP key and when it was minted (s) */
export type OAuthTokenRef = { jkt: string; iat: number }

/** a revoked app password: its sessions end, and its live access tokens with them */
export async function endAppPasswordSessions(db: Db, did: string, name: string): Promise<void> {
  await db.transact(async (trx) => {
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
    const kept = parse<Revoked>(row.revoked_app_passwords).filter((e) => e.u > now)
    kept.push({ n: name, c: gone.created_at, u: now + ACCESS_TTL_S + 60 })
    await trx
      .updateTable('account')
      .set({ revoked_app_passwords: JSON.stringify(kept) })
      .where('did', '=', did)
      .execute()
  })
}

/**
 * a person ending one app's access (the account page): every OAuth grant of `clientId` on the
 * account, its unexchanged codes, and the access tokens already out (matched by the grants' DPoP
 * keys and minted until now). Returns how many grants ended.
 */
export async function endClientGrants(db: Db, did: string, clientId: string, accessTtlS: number): Promise<number> {
  return endGrants(db, did, accessTtlS, async (trx) => {
    await trx.deleteFrom('oauth_code').where('did', '=', did).where('client_id', '=', clientId).execute()
    return trx
      .deleteFrom('refresh_token')
      .where('did', '=', did)
      .where('kind', '=', 'oauth')
      .where('client_id', '=', clientId)
      .returning('dpop_jkt')
      .execute()
  })
}

/** an app signing out (token revocation): the grant whose refresh token, or latest access token, is `jti`, its access tokens too */
export async function endGrant(db: Db, did: string, jti: string, accessTtlS: number): Promise<number> {
  return endGrants(db, did, accessTtlS, (trx) =>
    trx
      .deleteFrom('refresh_token')
      .where('kind', '=', 'oauth')
      .where('did', '=', did)
      .where((eb) => eb.or([eb('jti', '=', jti), eb('access_jti', '=', jti)]))
      .returning('dpop_jkt')
      .execute(),
  )
}

async function endGrants(db: Db, did: string, accessTtlS: number, remove: (trx: Store) => Promise<{ dpop_jkt: string | null }[]>) {
  return db.transact(async (trx) => {
    // concurrent revocations queue on the account row, so none loses the other's entry
    const row = await lockingRead(db.dialect, trx.selectFrom('account').select('revoked_grants').where('did', '=', did)).executeTakeFirst()
    if (!row) return 0
    const grants = await remove(trx)
    if (!grants.length) return 0
    const now = Math.floor(Date.now() / 1000)
    // an entry is needed only while an access token minted before it could still be presented
    const kept = parse<RevokedGrant>(row.revoked_grants).filter((e) => e.u > now)
    for (const g of grants) if (g.dpop_jkt) kept.push({ k: g.dpop_jkt, t: now, u: now + accessTtlS + 60 })
    await trx
      .updateTable('account')
      .set({ revoked_grants: JSON.stringify(kept) })
      .where('did', '=', did)
      .execute()
    return grants.length
  })
}

/** true when a token of generation `gen` (from app password `appPassword`, or an OAuth grant) no longer stands */
export function isRevoked(account: RevocationState, gen: unknown, appPassword?: AppPasswordRef, oauth?: OAuthTokenRef): boolean {
  if ((typeof gen === 'number' ? gen : 0) !== account.credential_gen) return true
  if (oauth && account.revoked_grants) {
    // minted in the second its grant ended or earlier: a grant made afterwards has a fresh key anyway
    return parse<RevokedGrant>(account.revoked_grants).some((e) => e.k === oauth.jkt && oauth.iat <= e.t)
  }
  if (!appPassword || !account.revoked_app_passwords) return false
  // a token from before app passwords were told apart by creation time matches by name
  return parse<Revoked>(account.revoked_app_passwords).some(
    (e) => e.n === appPassword.name && (appPassword.at === undefined || e.c === appPassword.at),
  )
}

// the columns' few distinct values are parsed once each
const parsed = new Map<string, unknown[]>()
function parse<T>(text: string | null | undefined): readonly T[] {
  if (!text) return []
  let list = parsed.get(text)
  if (!list) {
    try {
      const v: unknown = JSON.parse(text)
      list = Array.isArray(v) ? v : []
    } catch {
      list = []
    }
    if (parsed.size >= 1024) parsed.delete(parsed.keys().next().value as string)
    parsed.set(text, list)
  }
  return list as T[]
}
