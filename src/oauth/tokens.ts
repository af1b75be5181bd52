// OAuth access and refresh tokens: ES256K JWTs signed with the OAuth key,
// bound to the client's DPoP key through cnf.jkt. Access tokens are not stored; each refresh token
// has a refresh_token record of kind `oauth`, which is the authority.
import { randomBytes } from 'node:crypto'
import { decodeParts, signEs256k, verifyEs256k, type OAuthKey } from '../jwt/es256k.js'

export const OAUTH_ACCESS_TTL_S = 30 * 60
export const OAUTH_REFRESH_TTL_S = 60 * 24 * 60 * 60

export type OAuthTokenClaims = {
  iss: string
  aud: string
  sub: string
  scope: string
  cnf: { jkt: string }
  iat: number
  exp: number
  jti: string
  token_kind?: 'refresh'
  /** the account's credential generation when minted: a password change ends older tokens */
  gen?: number
}

export type Issuer = { key: OAuthKey; issuer: string; audience: string }

export const randomId = (bytes = 24) => randomBytes(bytes).toString('base64url')

export async function mintOAuthPair(iss: Issuer, sub: string, scope: string, jkt: string, gen: number) {
  const iat = Math.floor(Date.now() / 1000)
  const base = { iss: iss.issuer, aud: iss.audience, sub, scope, cnf: { jkt }, iat, gen }
  const refreshJti = randomId()
  const accessJti = randomId()
  const access = await signEs256k(
    iss.key.keypair,
    { typ: 'at+jwt', kid: iss.key.kid },
    { ...base, exp: iat + OAUTH_ACCESS_TTL_S, jti: accessJti },
  )
  const refresh = await signEs256k(
    iss.key.keypair,
    { typ: 'refresh+jwt', kid: iss.key.kid },
    { ...base, exp: iat + OAUTH_REFRESH_TTL_S, jti: refreshJti, token_kind: 'refresh' },
  )
  return {
    access,
    refresh,
    refreshJti,
    accessJti,
    refreshExpiresAt: new Date((iat + OAUTH_REFRESH_TTL_S) * 1000).toISOString(),
  }
}

export type VerifyFailure = 'invalid' | 'expired'

/** signature, issuer, audience, expiry and token kind; a refresh token is never an access token */
export async function verifyOAuthToken(
  iss: Issuer,
  token: string,
  kind: 'access' | 'refresh',
  opts: { allowExpired?: boolean } = {},
): Promise<{ ok: true; claims: OAuthTokenClaims } | { ok: false; why: VerifyFailure }> {
  const parts = decodeParts(token)
  if (!parts) return { ok: false, why: 'invalid' }
  const { header, payload: p } = parts
  const typ = kind === 'access' ? 'at+jwt' : 'refresh+jwt'
  if (header.alg !== 'ES256K' || header.typ !== typ) return { ok: false, why: 'invalid' }
  if (!(await verifyEs256k(token, iss.key.didKey))) return { ok: false, why: 'invalid' }
  if (!hasClaims(p, iss, kind)) return { ok: false, why: 'invalid' }
  if (!opts.allowExpired && p.exp <= Math.floor(Date.now() / 1000)) return { ok: false, why: 'expired' }
  return { ok: true, claims: p }
}

/** the claims a `kind` token of this issuer carries (every token it mints has an `iat`) */
function hasClaims(p: Record<string, unknown>, iss: Issuer, kind: 'access' | 'refresh'): p is Record<string, unknown> & OAuthTokenClaims {
  const cnf = p.cnf as { jkt?: unknown } | undefined
  return (
    p.iss === iss.issuer &&
    p.aud === iss.audience &&
    typeof p.sub === 'string' &&
    p.sub.startsWith('did:') &&
    typeof p.scope === 'string' &&
    typeof p.jti === 'string' &&
    typeof p.exp === 'number' &&
    typeof p.iat === 'number' &&
    typeof cnf?.jkt === 'string' &&
    (kind === 'refresh') === (p.token_kind === 'refresh')
  )
}
