// Session token pair of part 1 §2.2: HS256 with PDS_JWT_SECRET; access (at+jwt, 2 h, never
// stored) and refresh (refresh+jwt, 60 days, one stored record per token).
import { randomBytes } from 'node:crypto'
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose'
import { xrpcError } from '../errors.js'

export const ACCESS_TTL_S = 2 * 60 * 60
export const REFRESH_TTL_S = 60 * 24 * 60 * 60
export const ACCESS_SCOPE = 'com.atproto.access'
export const REFRESH_SCOPE = 'com.atproto.refresh'

export type TokenKeys = { secret: Uint8Array; serviceDid: string }

export type SessionClaims = {
  sub: string
  jti: string
  exp: number
  /** set when the session came from an app password: access tokens are never looked up, so the
   *  token itself says whether the app password is privileged (DECISIONS.md 1) */
  app_password?: { name: string; privileged: boolean }
}

export const newJti = () => randomBytes(24).toString('base64url')

export function tokenKeys(jwtSecret: string, serviceDid: string): TokenKeys {
  return { secret: new TextEncoder().encode(jwtSecret), serviceDid }
}

export async function mintPair(
  keys: TokenKeys,
  did: string,
  appPassword?: { name: string; privileged: boolean },
) {
  const now = Math.floor(Date.now() / 1000)
  const extra = appPassword ? { app_password: appPassword } : {}
  const sign = (typ: string, scope: string, ttl: number, jti: string) =>
    new SignJWT({ scope, ...extra })
      .setProtectedHeader({ alg: 'HS256', typ })
      .setIssuer(keys.serviceDid)
      .setAudience(keys.serviceDid)
      .setSubject(did)
      .setIssuedAt(now)
      .setExpirationTime(now + ttl)
      .setJti(jti)
      .sign(keys.secret)
  const refreshJti = newJti()
  return {
    accessJwt: await sign('at+jwt', ACCESS_SCOPE, ACCESS_TTL_S, newJti()),
    refreshJwt: await sign('refresh+jwt', REFRESH_SCOPE, REFRESH_TTL_S, refreshJti),
    refreshJti,
    refreshExpiresAt: new Date((now + REFRESH_TTL_S) * 1000).toISOString(),
  }
}

/** verifies signature, issuer, audience, typ, scope and expiry; errors are the spec's names */
export async function verifySessionToken(
  keys: TokenKeys,
  token: string,
  kind: 'access' | 'refresh',
): Promise<SessionClaims> {
  const [typ, scope] = kind === 'access' ? ['at+jwt', ACCESS_SCOPE] : ['refresh+jwt', REFRESH_SCOPE]
  let payload
  try {
    ;({ payload } = await jwtVerify(token, keys.secret, {
      algorithms: ['HS256'],
      issuer: keys.serviceDid,
      audience: keys.serviceDid,
      typ,
      requiredClaims: ['sub', 'exp', 'iat', 'jti', 'scope'],
    }))
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw xrpcError('ExpiredToken', 'Token has expired')
    throw xrpcError('InvalidToken', 'Token could not be verified')
  }
  if (payload.scope !== scope) throw xrpcError('InvalidToken', 'Bad token scope')
  if (typeof payload.sub !== 'string' || !payload.sub.startsWith('did:')) {
    throw xrpcError('InvalidToken', 'Malformed token')
  }
  return payload as unknown as SessionClaims
}
