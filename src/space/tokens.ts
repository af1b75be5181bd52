// The two tokens of space access, as compact JWS (ES256K or ES256, 64-byte r||s signatures).
// A delegation token is minted by the user's PDS: "this app acts for this user in this space",
// addressed to the authority's space host, 60 s, single use; it says nothing about membership.
// A space credential is minted by the space host for the authority, bound to the key of the
// exchange's DPoP proof (`cnf.jkt`), with no audience: it is reused at every repo host of the
// space for 2 hours. Signing keys, DID resolution, the replay store and the clock are injected.
import { createHash, randomBytes } from 'node:crypto'
import { type Signer, verifySignature } from '@atproto/crypto'
import { isValidDid } from '@atproto/syntax'
import { spaceError } from './errors.js'
import { type SpaceRef, isSpaceRef, parseSpaceRef, spaceHostAudience } from './refs.js'

export const DELEGATION_TYP = 'atproto-space-delegation+jwt'
export const CREDENTIAL_TYP = 'atproto-space-credential+jwt'
export const DELEGATION_LIFETIME_S = 60
export const CREDENTIAL_LIFETIME_S = 7200
/** allowed clock skew on `exp` */
export const EXP_SKEW_S = 5

const ALGS = new Set(['ES256K', 'ES256'])
const DELEGATION_KIDS = new Set(['#atproto'])
// the authority's dedicated space key, or its repo signing key when it publishes none
const CREDENTIAL_KIDS = new Set(['#atproto_space', '#atproto'])

/** the did:key of verification method `kid` in `iss`'s DID document; `fresh` skips any cached document */
export type KeyResolver = (iss: string, kid: string, fresh: boolean) => Promise<string | undefined>

export type VerifyDeps = {
  keyFor: KeyResolver
  /** milliseconds since the epoch */
  now?: () => number
}

export type DelegationClaims = { iss: string; space: SpaceRef; aud: string; iat: number; exp: number; jti: string }
export type CredentialClaims = { iss: string; space: SpaceRef; jkt: string; iat: number; exp: number; jti: string }

type Header = Record<string, unknown>
type Payload = Record<string, unknown>

/** a delegation token for `user` in `space`, signed with the user's repo signing key */
export async function mintDelegationToken(opts: {
  user: string
  space: string
  signer: Signer
  now?: () => number
  jti?: string
}): Promise<string> {
  const ref = parseSpaceRef(opts.space)
  const iat = seconds(opts.now)
  const payload = {
    iss: opts.user,
    sub: ref.uri,
    aud: spaceHostAudience(ref.authority),
    iat,
    exp: iat + DELEGATION_LIFETIME_S,
    jti: opts.jti ?? newJti(),
  }
  return sign({ typ: DELEGATION_TYP, alg: opts.signer.jwtAlg, kid: '#atproto' }, payload, opts.signer)
}

/** a space credential for `space`, issued by its authority and bound to the DPoP key thumbprint `jkt` */
export async function mintSpaceCredential(opts: {
  space: string
  jkt: string
  signer: Signer
  now?: () => number
  jti?: string
}): Promise<string> {
  const ref = parseSpaceRef(opts.space)
  if (!opts.jkt) throw new RangeError('a space credential needs the DPoP key thumbprint')
  const iat = seconds(opts.now)
  const payload = {
    iss: ref.authority,
    sub: ref.uri,
    cnf: { jkt: opts.jkt },
    iat,
    exp: iat + CREDENTIAL_LIFETIME_S,
    jti: opts.jti ?? newJti(),
  }
  return sign({ typ: CREDENTIAL_TYP, alg: opts.signer.jwtAlg, kid: '#atproto' }, payload, opts.signer)
}

/**
 * A delegation token's claims, checked: typ, claims, expiry and a lifetime no longer than a
 * delegation token's, audience (the authority's space host), the user's signature, then single
 * use through `claimOnce` (false when `iss` + `jti` was seen before; it remembers them until `expMs`).
 */
export async function verifyDelegationToken(
  token: string | undefined,
  deps: VerifyDeps & { claimOnce: (iss: string, jti: string, expMs: number) => Promise<boolean> },
): Promise<DelegationClaims> {
  const jwt = decode(token, DELEGATION_TYP)
  const { payload } = jwt
  const iss = payload.iss
  if (typeof iss !== 'string' || !isValidDid(iss)) throw spaceError('BadJwtIss', 'iss must be the user DID')
  const { sub, exp, iat } = requireClaims(payload)
  const now = seconds(deps.now)
  expiry(exp, now)
  if (exp - now > DELEGATION_LIFETIME_S + EXP_SKEW_S)
    throw spaceError('BadJwt', `a delegation token lives at most ${DELEGATION_LIFETIME_S} s`)
  if (!isSpaceRef(sub)) throw spaceError('BadJwt', 'sub must be a space reference')
  const space = parseSpaceRef(sub)
  if (payload.aud !== spaceHostAudience(space.authority))
    throw spaceError('BadJwtAudience', `aud must be ${spaceHostAudience(space.authority)}`)
  const jti = payload.jti
  if (typeof jti !== 'string' || jti === '') throw spaceError('BadJwt', 'jti is missing')
  await signature(jwt, iss, DELEGATION_KIDS, deps.keyFor)
  if (!(await deps.claimOnce(iss, jti, exp * 1000))) throw spaceError('JwtReplayed', 'this delegation token was already used')
  return { iss, space, aud: payload.aud, iat, exp, jti }
}

/**
 * A space credential's claims, checked in this order: typ; iss, sub and exp present and not
 * expired; sub a space reference; the signature with the issuer's `kid` key (the DID document
 * resolved afresh once on failure, for a rotated key); iss the authority of sub; cnf.jkt present.
 * The DPoP proof (its key's thumbprint equal to `jkt`) is the caller's next check.
 */
export async function verifySpaceCredential(token: string | undefined, deps: VerifyDeps): Promise<CredentialClaims> {
  const jwt = decode(token, CREDENTIAL_TYP)
  const { payload } = jwt
  const iss = payload.iss
  if (typeof iss !== 'string' || !isValidDid(iss)) throw spaceError('BadJwtIss', 'iss must be the authority DID')
  const { sub, exp, iat } = requireClaims(payload)
  expiry(exp, seconds(deps.now))
  if (!isSpaceRef(sub)) throw spaceError('BadJwt', 'sub must be a space reference')
  const space = parseSpaceRef(sub)
  await signature(jwt, iss, CREDENTIAL_KIDS, deps.keyFor)
  if (iss !== space.authority) throw spaceError('BadJwtIss', 'a space credential must be issued by the authority of its space')
  const cnf = payload.cnf as { jkt?: unknown } | undefined
  const jkt = cnf && typeof cnf === 'object' ? cnf.jkt : undefined
  if (typeof jkt !== 'string' || jkt === '') throw spaceError('BadJwt', 'cnf.jkt is missing')
  const jti = typeof payload.jti === 'string' ? payload.jti : ''
  return { iss, space, jkt, iat, exp, jti }
}

/** InvalidCredential unless the credential is for the request's `space` (compared byte for byte) */
export function requireCredentialFor(claims: CredentialClaims, space: string): void {
  if (claims.space.uri !== space) throw spaceError('InvalidCredential', 'the space credential is for another space')
}

/** InvalidDelegationToken unless the token is for the requested `space` */
export function requireDelegationFor(claims: DelegationClaims, space: string): void {
  if (claims.space.uri !== space) throw spaceError('InvalidDelegationToken', 'the delegation token is for another space')
}

/** the `typ` in a token's header, unverified: only for telling space tokens from OAuth ones */
export function peekTokenType(token: string): string | undefined {
  try {
    const typ = JSON.parse(Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString('utf8'))?.typ
    return typeof typ === 'string' ? typ : undefined
  } catch {
    return undefined
  }
}

/** the `ath` a DPoP proof carries with a space credential: base64url(SHA-256(credential)) */
export const credentialAth = (credential: string) => createHash('sha256').update(credential).digest('base64url')

type Jwt = { header: Header; payload: Payload; signed: Uint8Array; sig: Uint8Array }

function decode(token: string | undefined, typ: string): Jwt {
  if (!token) throw spaceError('MissingJwt', 'a token is required')
  const parts = token.split('.')
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) throw spaceError('BadJwt', 'not a compact JWS')
  const header = json(parts[0])
  const payload = json(parts[1])
  if (!header || !payload) throw spaceError('BadJwt', 'the header and payload must be JSON objects')
  if (header.typ !== typ) throw spaceError('BadJwtType', `typ must be ${typ}`)
  if (typeof header.alg !== 'string' || !ALGS.has(header.alg)) throw spaceError('BadJwt', 'alg must be ES256K or ES256')
  return { header, payload, signed: Buffer.from(`${parts[0]}.${parts[1]}`), sig: Buffer.from(parts[2], 'base64url') }
}

function requireClaims(payload: Payload): { sub: string; exp: number; iat: number } {
  const { sub, exp, iat } = payload
  if (typeof sub !== 'string') throw spaceError('BadJwt', 'sub is missing')
  if (typeof exp !== 'number' || !Number.isSafeInteger(exp)) throw spaceError('BadJwt', 'exp is missing')
  return { sub, exp, iat: typeof iat === 'number' && Number.isSafeInteger(iat) ? iat : 0 }
}

function expiry(exp: number, now: number) {
  if (exp + EXP_SKEW_S < now) throw spaceError('JwtExpired', 'the token has expired')
}

async function signature(jwt: Jwt, iss: string, kids: Set<string>, keyFor: KeyResolver) {
  const kid = jwt.header.kid
  if (typeof kid !== 'string' || !kids.has(kid)) throw spaceError('BadJwt', `kid must be ${[...kids].join(' or ')}`)
  if (jwt.sig.length !== 64) throw spaceError('BadJwtSignature', 'the signature must be 64 bytes (r||s)')
  const alg = jwt.header.alg as string
  for (const fresh of [false, true]) {
    const key = await keyFor(iss, kid, fresh)
    if (key && (await verifies(key, jwt, alg))) return
  }
  throw spaceError('BadJwtSignature', `the signature does not verify with ${iss}${kid}`)
}

async function verifies(didKey: string, jwt: Jwt, alg: string): Promise<boolean> {
  try {
    // low-S is required of secp256k1 signatures only; generic P-256 signers do not normalize
    return await verifySignature(didKey, jwt.signed, jwt.sig, { jwtAlg: alg, allowMalleableSig: alg === 'ES256' })
  } catch {
    return false // a key of another type than alg, or not a did:key
  }
}

async function sign(header: Header, payload: Payload, signer: Signer): Promise<string> {
  if (!ALGS.has(signer.jwtAlg)) throw new RangeError(`space tokens are signed with ES256K or ES256, not ${signer.jwtAlg}`)
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
  const signed = `${b64(header)}.${b64(payload)}`
  const sig = await signer.sign(Buffer.from(signed))
  return `${signed}.${Buffer.from(sig).toString('base64url')}`
}

function json(part: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : undefined
  } catch {
    return undefined
  }
}

const seconds = (now: (() => number) | undefined) => Math.floor((now ?? Date.now)() / 1000)
const newJti = () => randomBytes(16).toString('hex')
