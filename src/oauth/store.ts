// The authorization server's rows: pushed requests (single use), authorization codes (single use)
// and OAuth refresh tokens (rotated on every use). Each use that must win once is a conditional
// write, so of two concurrent callers exactly one succeeds.
import type { Selectable } from 'kysely'
import type { Db } from '../db/index.js'
import type { OAuthCodeTable, OAuthRequestTable, Store } from '../db/schema.js'

export type OAuthRequest = Selectable<OAuthRequestTable>
export type OAuthCode = Selectable<OAuthCodeTable>
/** what an access/refresh pair adds to its refresh row */
export type MintedPair = { refreshJti: string; accessJti: string; refreshExpiresAt: string }
/** the grant a refresh row records: whose, bound to which key, for which client and scope */
export type Grant = { did: string; jkt: string; scope: string; clientId: string }

const nowIso = () => new Date().toISOString()

/** stores a pushed request; the expired ones are swept as new ones arrive */
export async function saveRequest(db: Store, request: Omit<OAuthRequest, 'created_at'>): Promise<void> {
  await db.deleteFrom('oauth_request').where('expires_at', '<', nowIso()).execute()
  await db
    .insertInto('oauth_request')
    .values({ ...request, created_at: nowIso() })
    .execute()
}

/** the unexpired request `requestUri` names */
export function pendingRequest(db: Store, requestUri: string): Promise<OAuthRequest | undefined> {
  return db
    .selectFrom('oauth_request')
    .selectAll()
    .where('request_uri', '=', requestUri)
    .where('expires_at', '>', nowIso())
    .executeTakeFirst()
}

export async function dropRequest(db: Store, requestUri: string): Promise<void> {
  await db.deleteFrom('oauth_request').where('request_uri', '=', requestUri).execute()
}

/**
 * Turns the request into a code for `did`: false when the request is gone (used by a concurrent
 * sign-in, or expired), and no code is made then.
 */
export async function issueCode(db: Db, request: OAuthRequest, did: string, code: string, expiresAt: string): Promise<boolean> {
  // expired and used codes are useless: sweep them as new ones are issued
  await db.deleteFrom('oauth_code').where('expires_at', '<', nowIso()).execute()
  return db.transact(async (trx) => {
    const gone = await trx
      .deleteFrom('oauth_request')
      .where('request_uri', '=', request.request_uri)
      .where('expires_at', '>', nowIso())
      .executeTakeFirst()
    if (Number(gone.numDeletedRows) !== 1) return false
    await trx
      .insertInto('oauth_code')
      .values({
        code,
        did,
        client_id: request.client_id,
        redirect_uri: request.redirect_uri,
        scope: request.scope,
        code_challenge: request.code_challenge,
        dpop_jkt: request.dpop_jkt,
        used: 0,
        expires_at: expiresAt,
        created_at: nowIso(),
      })
      .execute()
    return true
  })
}

export function getCode(db: Store, code: string): Promise<OAuthCode | undefined> {
  return db.selectFrom('oauth_code').selectAll().where('code', '=', code).executeTakeFirst()
}

/** the account a grant may be made or renewed for: undefined once taken down or deleted */
export async function grantableAccount(db: Store, did: string) {
  const account = await db.selectFrom('account').select(['did', 'status', 'credential_gen']).where('did', '=', did).executeTakeFirst()
  return !account || account.status === 'takendown' || account.status === 'deleted' ? undefined : account
}

export type Redeemed<E, P> = { ok: true; pair: P } | { ok: false; refused: E | 'used' | 'account' }

/**
 * Redeems `code` in one transaction: marks it used (of concurrent redemptions one wins), then
 * `refuse` checks the request against it, then the account, then `mint` makes the pair whose
 * refresh row is stored. Any refusal still burns the code.
 */
export async function redeemCode<E, P extends MintedPair>(
  db: Db,
  code: OAuthCode,
  refuse: () => E | undefined,
  mint: (credentialGen: number) => Promise<P>,
): Promise<Redeemed<E, P>> {
  const now = nowIso()
  return db.transact(async (trx): Promise<Redeemed<E, P>> => {
    const marked = await trx
      .updateTable('oauth_code')
      .set({ used: 1 })
      .where('code', '=', code.code)
      .where('used', '=', 0)
      .where('expires_at', '>', now)
      .executeTakeFirst()
    if (Number(marked.numUpdatedRows) !== 1) return { ok: false, refused: 'used' }
    const refused = refuse()
    if (refused !== undefined) return { ok: false, refused }
    const account = await grantableAccount(trx, code.did)
    if (!account) return { ok: false, refused: 'account' }
    const pair = await mint(account.credential_gen)
    await insertRefresh(trx, pair, { did: code.did, jkt: code.dpop_jkt, scope: code.scope, clientId: code.client_id })
    return { ok: true, pair }
  })
}

export function getOAuthRefresh(db: Store, jti: string) {
  return db.selectFrom('refresh_token').selectAll().where('jti', '=', jti).executeTakeFirst()
}

/** replaces refresh row `oldJti` by the new pair's; false when another use took it first */
export async function rotateRefresh(db: Db, oldJti: string, pair: MintedPair, grant: Grant): Promise<boolean> {
  return db.transact(async (trx) => {
    const gone = await trx.deleteFrom('refresh_token').where('jti', '=', oldJti).where('kind', '=', 'oauth').executeTakeFirst()
    if (Number(gone.numDeletedRows) !== 1) return false
    await insertRefresh(trx, pair, grant)
    return true
  })
}

async function insertRefresh(trx: Store, pair: MintedPair, grant: Grant): Promise<void> {
  await trx
    .insertInto('refresh_token')
    .values({
      jti: pair.refreshJti,
      did: grant.did,
      expires_at: pair.refreshExpiresAt,
      app_password_name: null,
      kind: 'oauth',
      dpop_jkt: grant.jkt,
      scope: grant.scope,
      client_id: grant.clientId,
      access_jti: pair.accessJti,
      created_at: nowIso(),
    })
    .execute()
}

/** keeps a request a person is working through alive a while longer (never past `until`) */
export async function extendRequest(db: Store, request: OAuthRequest, until: string): Promise<void> {
  await db.updateTable('oauth_request').set({ expires_at: until }).where('request_uri', '=', request.request_uri).execute()
}

/** the scopes `did` already granted `clientId` through live OAuth grants */
export async function grantedScopes(db: Store, did: string, clientId: string): Promise<Set<string>> {
  const rows = await db
    .selectFrom('refresh_token')
    .select('scope')
    .where('did', '=', did)
    .where('kind', '=', 'oauth')
    .where('client_id', '=', clientId)
    .where('expires_at', '>', nowIso())
    .execute()
  return new Set(rows.flatMap((r) => (r.scope ?? '').split(' ').filter(Boolean)))
}

/** an app with live OAuth grants on the account: when it last renewed its access, what it may do */
export type ConnectedApp = { clientId: string; scope: string; lastActiveAt: string; grants: number }

/** the account's apps with live grants, most recently active first (several grants of one app, e.g.
 *  signed in on two devices, are one app whose permissions are all of theirs) */
export async function connectedApps(db: Store, did: string): Promise<ConnectedApp[]> {
  const rows = await db
    .selectFrom('refresh_token')
    .select(['client_id', 'scope', 'created_at'])
    .where('did', '=', did)
    .where('kind', '=', 'oauth')
    .where('expires_at', '>', nowIso())
    .execute()
  const apps = new Map<string, ConnectedApp>()
  for (const r of rows) {
    if (!r.client_id) continue
    const app = apps.get(r.client_id) ?? { clientId: r.client_id, scope: '', lastActiveAt: r.created_at, grants: 0 }
    app.scope = [...new Set([...app.scope.split(' '), ...(r.scope ?? '').split(' ')].filter(Boolean))].join(' ')
    if (r.created_at > app.lastActiveAt) app.lastActiveAt = r.created_at
    app.grants++
    apps.set(r.client_id, app)
  }
  return [...apps.values()].sort((a, b) => b.lastActiveAt.localeCompare(a.lastActiveAt))
}
