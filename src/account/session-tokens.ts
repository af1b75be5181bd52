// Session token pair: HS256 with PDS_JWT_SECRET; access (at+jwt, 2 h, never
// stored) and refresh (refresh+jwt, 60 days, one stored record per token).
//
// HS256 is done with node:crypto's synchronous HMAC on a KeyObject made once from the secret:
// WebCrypto (what jose uses) costs an async job and a key import per call, which was the largest
// single cost of an authenticated request. The checks are jose's jwtVerify ones, in its order.
import { createHmac, createSecretKey, randomFillSync, timingSafeEqual, type KeyObject } from 'node:crypto'
import { xrpcError } from '../errors.js'

export const ACCESS_TTL_S = 2 * 60 * 60
export const REFRESH_TTL_S = 60 * 24 * 60 * 60
export const ACCESS_SCOPE = 'com.atproto.access'
export const REFRESH_SCOPE = 'com.atproto.refresh'
/** a taken-down account's access token (createSession with allowTakendown): only the methods whose
 *  row admits taken-down accounts accept it (reporting, to appeal) */
export const TAKENDOWN_SCOPE = 'com.atproto.takendown'

export type TokenKeys = {
  secret: Uint8Array
  serviceDid: string
  /** the secret as a KeyObject, imported once */
  hmacKey: KeyObject
  /** access tokens that passed every check, by token (see verifySessionToken) */
  verifiedAccess: Map<string, VerifiedClaims>
}

export type SessionClaims = {
  sub: string
  jti: string
  exp: number
  /** ACCESS_SCOPE, REFRESH_SCOPE, or TAKENDOWN_SCOPE for a taken-down account's access token */
  scope?: string
  /** set when the session came from an app password: access tokens are never looked up, so the
   *  token itself says whether the app password is privileged */
  app_password?: AppPasswordClaim
  /** the account's credential generation when minted: a password change ends older tokens */
  gen?: number
}

/** `at`: the app password's creation time, which tells it from a later one of the same name */
export type AppPasswordClaim = { name: string; privileged: boolean; at?: string }

// one call into the CSPRNG per 256 token ids instead of one per id; a slice is never handed out twice
const JTI_BYTES = 24
const pool = Buffer.alloc(JTI_BYTES * 256)
let poolAt = pool.length

export function newJti(): string {
  if (poolAt === pool.length) {
    randomFillSync(pool)
    poolAt = 0
  }
  poolAt += JTI_BYTES
  return pool.toString('base64url', poolAt - JTI_BYTES, poolAt)
}

export function tokenKeys(jwtSecret: string, serviceDid: string): TokenKeys {
  const secret = new TextEncoder().encode(jwtSecret)
  return { secret, serviceDid, hmacKey: createSecretKey(secret), verifiedAccess: new Map() }
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')
const hmac = (key: KeyObject, input: string) => createHmac('sha256', key).update(input).digest()

/** a compact HS256 JWS of the payload */
function signHs256(key: KeyObject, typ: string, payload: Record<string, unknown>): string {
  const input = `${b64url({ alg: 'HS256', typ })}.${b64url(payload)}`
  return `${input}.${hmac(key, input).toString('base64url')}`
}

const BASE64URL = /^[A-Za-z0-9_-]*$/

function parseJsonObject(segment: string): Record<string, unknown> | undefined {
  if (!BASE64URL.test(segment)) return undefined
  try {
    const v = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'))
    return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined
  } catch {
    return undefined
  }
}

/** jose's typ normalization: case-insensitive, an `application/` prefix ignored */
const normalizeTyp = (v: string) => {
  const t = v.toLowerCase()
  return t.startsWith('application/') ? t.slice('application/'.length) : t
}

const invalid = () => xrpcError('InvalidToken', 'Token could not be verified')

export async function mintPair(keys: TokenKeys, did: string, appPassword?: AppPasswordClaim, gen = 0, opts: { takendown?: boolean } = {}) {
  const now = Math.floor(Date.now() / 1000)
  const extra = { ...(appPassword ? { app_password: appPassword } : {}), gen }
  const sign = (typ: string, scope: string, ttl: number, jti: string) =>
    signHs256(keys.hmacKey, typ, {
      scope,
      ...extra,
      iss: keys.serviceDid,
      aud: keys.serviceDid,
      sub: did,
      iat: now,
      exp: now + ttl,
      jti,
    })
  const refreshJti = newJti()
  return {
    accessJwt: sign('at+jwt', opts.takendown ? TAKENDOWN_SCOPE : ACCESS_SCOPE, ACCESS_TTL_S, newJti()),
    refreshJwt: sign('refresh+jwt', REFRESH_SCOPE, REFRESH_TTL_S, refreshJti),
    refreshJti,
    refreshExpiresAt: new Date((now + REFRESH_TTL_S) * 1000).toISOString(),
  }
}

// Access tokens are presented again and again for their two hours: a token that passed every
// check is remembered (bounded, oldest out), and a later presentation repeats only the checks
// that depend on the clock.
const VERIFIED_MAX = 10_000
type VerifiedClaims = SessionClaims & { nbf?: number }

/** verifies signature, issuer, audience, typ, scope and expiry; errors are the lexicons' names */
export async function verifySessionToken(keys: TokenKeys, token: string, kind: 'access' | 'refresh'): Promise<SessionClaims> {
  const verifiedAccess = keys.verifiedAccess
  const known = kind === 'access' ? verifiedAccess.get(token) : undefined
  if (known) {
    checkClock(known)
    return known
  }
  const payload = verifyUncached(keys, token, kind)
  if (kind === 'access') {
    if (verifiedAccess.size >= VERIFIED_MAX) verifiedAccess.delete(verifiedAccess.keys().next().value as string)
    verifiedAccess.set(token, payload)
  }
  return payload
}

function checkClock(payload: { nbf?: unknown; exp?: unknown }, now = Math.floor(Date.now() / 1000)) {
  if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > now)) throw invalid()
  if (typeof payload.exp !== 'number') throw invalid()
  if (payload.exp <= now) throw xrpcError('ExpiredToken', 'Token has expired')
}

function verifyUncached(keys: TokenKeys, token: string, kind: 'access' | 'refresh') {
  const [typ, scope] = kind === 'access' ? ['at+jwt', ACCESS_SCOPE] : ['refresh+jwt', REFRESH_SCOPE]
  // the signature first, then the claims (jose's jwtVerify order)
  const parts = token.split('.')
  if (parts.length !== 3) throw invalid()
  const [h, p, sig] = parts
  const header = parseJsonObject(h)
  if (!header || header.alg !== 'HS256' || header.crit !== undefined) throw invalid()
  if (!BASE64URL.test(sig)) throw invalid()
  const given = Buffer.from(sig, 'base64url')
  const want = hmac(keys.hmacKey, `${h}.${p}`)
  if (given.length !== want.length || !timingSafeEqual(given, want)) throw invalid()
  const payload = parseJsonObject(p)
  if (!payload) throw invalid()
  if (typeof header.typ !== 'string' || normalizeTyp(header.typ) !== typ) throw invalid()
  for (const claim of ['sub', 'exp', 'iat', 'jti', 'scope']) if (!(claim in payload)) throw invalid()
  if (payload.iss !== keys.serviceDid) throw invalid()
  const aud = payload.aud
  if (!(aud === keys.serviceDid || (Array.isArray(aud) && aud.includes(keys.serviceDid)))) throw invalid()
  if (typeof payload.iat !== 'number') throw invalid()
  checkClock(payload)
  if (payload.scope !== scope && !(kind === 'access' && payload.scope === TAKENDOWN_SCOPE))
    throw xrpcError('InvalidToken', 'Bad token scope')
  if (typeof payload.sub !== 'string' || !payload.sub.startsWith('did:')) {
    throw xrpcError('InvalidToken', 'Malformed token')
  }
  if (!isSessionClaims(payload)) throw invalid()
  return Object.freeze(payload)
}

// the claims' types; their values were checked above, and only this server's key signs them
function isSessionClaims(p: Record<string, unknown>): p is Record<string, unknown> & VerifiedClaims {
  return typeof p.sub === 'string' && typeof p.jti === 'string' && typeof p.exp === 'number'
}
