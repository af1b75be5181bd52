// DPoP proof verification (RFC 9449): typ, alg ES256K or ES256, the embedded
// public jwk signs the proof, iat within ±60 s, htm/htu equal to the live request (htu without
// query and fragment, scheme and host from PDS_PUBLIC_URL), ath whenever an access token comes
// with the proof, a server-issued nonce that is still current (last of the proof's own checks, so
// a proof wrong in another way is told so), and a jti never accepted while a proof carrying it
// could still be accepted.
// Checking and recording are two steps: callers record a proof only once what it is bound to
// (the access token, the code or refresh token) has verified, so strangers cannot fill the store.
import { createHash, createPublicKey, verify as verifySig, type KeyObject } from 'node:crypto'
import { base64url, type JWK } from 'jose'
import { decodeParts, didKeyFromK256Jwk, verifyEs256k } from './es256k.js'
import type { DpopNonces } from './dpop-nonce.js'
import { REPLAY_WINDOW_S, ReplayStoreFull, type ReplayStore } from './replay.js'

export class DpopError extends Error {}

/** the proof is sound but carries no current nonce: the client retries with the one in DPoP-Nonce */
export class DpopNonceRequired extends Error {}

const IAT_TOLERANCE_S = 60

export type DpopCheck = {
  proof: string | string[] | undefined
  method: string
  /** the live request URL without query or fragment, on the public base */
  url: string
  /** the access token the proof comes with: its `ath` must then be present and match */
  accessToken?: string
  /** the server's nonces: the proof's `nonce` must be one of those accepted now */
  nonces?: DpopNonces
}

/** a proof that passed every check but the replay check */
export type CheckedProof = {
  /** RFC 7638 thumbprint of the proof's key */
  jkt: string
  jti: string
  /** when a proof with this jti could no longer be accepted (ms since the epoch) */
  expiresAtMs: number
}

/** checks and records in one step, for callers that bind the proof to nothing further */
export async function verifyDpopProof(check: DpopCheck, replay: ReplayStore): Promise<{ jkt: string }> {
  const proof = await checkDpopProof(check)
  await rememberDpopProof(proof, replay)
  return { jkt: proof.jkt }
}

/**
 * refuses a proof whose jti was already accepted (last, so a proof refused for another reason
 * does not burn its jti; keyed by the jti alone, whatever key signs it again)
 */
export async function rememberDpopProof(proof: CheckedProof, replay: ReplayStore): Promise<void> {
  let first: boolean
  try {
    first = await replay.firstSeen(proof.jti, proof.jkt, proof.expiresAtMs)
  } catch (err) {
    if (err instanceof ReplayStoreFull) throw new DpopBusy(err.message)
    throw err
  }
  if (!first) throw new DpopError('DPoP proof replayed')
}

/** the replay store will hold no more proofs right now: retry shortly */
export class DpopBusy extends Error {}

/** every check of a proof except the replay check */
export async function checkDpopProof(check: DpopCheck): Promise<CheckedProof> {
  if (typeof check.proof !== 'string' || !check.proof) throw new DpopError('Missing or repeated DPoP header')
  const proof = check.proof
  const parts = decodeParts(proof)
  if (!parts) throw new DpopError('Malformed DPoP proof')
  const { header } = parts
  if (header.typ !== 'dpop+jwt') throw new DpopError('DPoP proof typ must be dpop+jwt')
  const jwk = header.jwk as JWK | undefined
  if (!jwk || typeof jwk !== 'object' || 'd' in jwk) throw new DpopError('DPoP proof must embed a public jwk')

  let payload: Record<string, unknown>
  if (header.alg === 'ES256') {
    if (!verifyEs256(proof, header, jwk)) throw new DpopError('Invalid DPoP proof signature')
    payload = parts.payload
    const now = Math.floor(Date.now() / 1000)
    // jose's claim checks, which the ES256 path always had
    if (payload.exp !== undefined && (typeof payload.exp !== 'number' || payload.exp <= now)) {
      throw new DpopError('Invalid DPoP proof signature')
    }
    if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > now)) {
      throw new DpopError('Invalid DPoP proof signature')
    }
  } else if (header.alg === 'ES256K') {
    let didKey: string
    try {
      didKey = didKeyFromK256Jwk(jwk)
    } catch {
      throw new DpopError('Invalid DPoP proof key')
    }
    // proofs come from any client library: a high-S signature is still a valid ECDSA signature
    if (!(await verifyEs256k(proof, didKey, { allowMalleable: true }))) throw new DpopError('Invalid DPoP proof signature')
    payload = parts.payload
  } else {
    throw new DpopError('DPoP proof alg must be ES256K or ES256')
  }

  const { htm, htu, iat, jti, ath } = payload
  const nowS = Date.now() / 1000
  if (typeof iat !== 'number' || Math.abs(iat - nowS) > IAT_TOLERANCE_S) {
    throw new DpopError('DPoP proof iat is not recent')
  }
  if (typeof jti !== 'string' || jti.length < 1 || jti.length > 256) throw new DpopError('DPoP proof jti is missing')
  if (htm !== check.method) throw new DpopError('DPoP proof htm does not match the request')
  if (typeof htu !== 'string' || normalizeHtu(htu) !== normalizeHtu(check.url)) {
    throw new DpopError('DPoP proof htu does not match the request')
  }
  if (check.accessToken !== undefined) {
    // without ath a proof captured beside one token could be presented with any other
    if (ath === undefined) throw new DpopError('DPoP proof ath is required with an access token')
    if (ath !== base64url.encode(createHash('sha256').update(check.accessToken).digest())) {
      throw new DpopError('DPoP proof ath does not match the access token')
    }
  } else if (ath !== undefined) {
    throw new DpopError('DPoP proof ath does not match the access token')
  }
  const jkt = thumbprint(jwk)
  if (check.nonces && !check.nonces.accepts(payload.nonce)) {
    throw new DpopNonceRequired(payload.nonce === undefined ? 'DPoP proof needs a nonce' : 'DPoP nonce is stale or unknown')
  }
  // a proof stays acceptable until iat + the tolerance (a clock ahead of ours makes that later
  // than now + the window): its jti is remembered until whichever comes last
  const expiresAtMs = Math.ceil(Math.max(iat + IAT_TOLERANCE_S, nowS + REPLAY_WINDOW_S) * 1000)
  return { jkt, jti, expiresAtMs }
}

// ES256 on node:crypto, synchronously, with each client's key imported once (a client signs every
// proof with one key): jose's WebCrypto path imported the key and ran two async jobs per proof.
// The checks are jose's jwtVerify ones with EmbeddedJWK: a public P-256 key, no crit, a 64-byte
// R||S signature (high S accepted, as WebCrypto does).
const P256_KEYS_MAX = 4096
const p256Keys = new Map<string, KeyObject>()
const SIG_64 = /^[A-Za-z0-9_-]{86}$/

function verifyEs256(proof: string, header: Record<string, unknown>, jwk: JWK): boolean {
  if (header.crit !== undefined || jwk.kty !== 'EC' || jwk.crv !== 'P-256') return false
  if (typeof jwk.x !== 'string' || typeof jwk.y !== 'string') return false
  const dot = proof.lastIndexOf('.')
  const sig = proof.slice(dot + 1)
  if (!SIG_64.test(sig)) return false
  try {
    return verifySig(
      'sha256',
      Buffer.from(proof.slice(0, dot)),
      { key: p256Key(jwk.x, jwk.y), dsaEncoding: 'ieee-p1363' },
      Buffer.from(sig, 'base64url'),
    )
  } catch {
    return false
  }
}

function p256Key(x: string, y: string): KeyObject {
  const id = `${x}.${y}`
  let key = p256Keys.get(id)
  if (!key) {
    // throws for a point that is not on the curve
    key = createPublicKey({ key: { kty: 'EC', crv: 'P-256', x, y }, format: 'jwk' })
    if (p256Keys.size >= P256_KEYS_MAX) p256Keys.delete(p256Keys.keys().next().value as string)
    p256Keys.set(id, key)
  }
  return key
}

/** RFC 7638 thumbprint of the proof's EC key (both accepted algs are EC): jose's members and order */
function thumbprint(jwk: JWK): string {
  const { crv, kty, x, y } = jwk
  if (typeof crv !== 'string' || typeof kty !== 'string' || typeof x !== 'string' || typeof y !== 'string') {
    throw new DpopError('Invalid DPoP proof key')
  }
  return createHash('sha256').update(JSON.stringify({ crv, kty, x, y })).digest('base64url')
}

function normalizeHtu(u: string): string | undefined {
  try {
    const url = new URL(u)
    url.search = ''
    url.hash = ''
    return url.href
  } catch {
    return undefined
  }
}

export { REPLAY_WINDOW_S }
