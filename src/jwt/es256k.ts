// ES256K JWTs (jose 6 has no secp256k1): signed with the keypairs of identity/k256.ts (compact,
// low-S: exactly the JWS R||S form) and verified with @atproto/crypto's verifySignature. jose
// supplies base64url, header/claim decoding and JWK thumbprints.
import { formatDidKey, parseDidKey, verifySignature, type Keypair } from '@atproto/crypto'
import { k256Keypair } from '../identity/k256.js'
import { base64url, calculateJwkThumbprint, decodeJwt, decodeProtectedHeader, type JWK } from 'jose'

const utf8 = new TextEncoder()

export async function signEs256k(keypair: Keypair, header: Record<string, unknown>, payload: Record<string, unknown>): Promise<string> {
  const input = `${base64url.encode(JSON.stringify({ ...header, alg: 'ES256K' }))}.${base64url.encode(JSON.stringify(payload))}`
  const sig = await keypair.sign(utf8.encode(input))
  return `${input}.${base64url.encode(sig)}`
}

// A signature check is a pure function of (key, token, malleability rule): positive answers are
// remembered (bounded, oldest first out), so a client reusing its access token pays the ECDSA
// verification once. Expiry and every claim are still checked by the caller on each use.
const verified = new Set<string>()
const VERIFIED_MAX = 2048

/** true when `jwt` carries a valid ES256K signature by `didKey` (a did:key) */
export async function verifyEs256k(jwt: string, didKey: string, opts: { allowMalleable?: boolean } = {}) {
  const memo = `${opts.allowMalleable ? 1 : 0}${didKey} ${jwt}`
  if (verified.has(memo)) return true
  const ok = await verifyEs256kUncached(jwt, didKey, opts)
  if (ok) {
    verified.add(memo)
    if (verified.size > VERIFIED_MAX) verified.delete(verified.values().next().value as string)
  }
  return ok
}

async function verifyEs256kUncached(jwt: string, didKey: string, opts: { allowMalleable?: boolean }) {
  const parts = jwt.split('.')
  if (parts.length !== 3) return false
  let sig: Uint8Array
  try {
    sig = base64url.decode(parts[2])
  } catch {
    return false
  }
  if (sig.length !== 64) return false
  try {
    return await verifySignature(didKey, utf8.encode(`${parts[0]}.${parts[1]}`), sig, {
      allowMalleableSig: opts.allowMalleable,
    })
  } catch {
    return false
  }
}

/** did:key of a public secp256k1 JWK (for verifySignature) */
export function didKeyFromK256Jwk(jwk: JWK): string {
  if (jwk.kty !== 'EC' || jwk.crv !== 'secp256k1' || typeof jwk.x !== 'string' || typeof jwk.y !== 'string') {
    throw new Error('not a secp256k1 public JWK')
  }
  const x = base64url.decode(jwk.x)
  const y = base64url.decode(jwk.y)
  if (x.length !== 32 || y.length !== 32) throw new Error('bad secp256k1 coordinates')
  const point = new Uint8Array(65)
  point[0] = 4
  point.set(x, 1)
  point.set(y, 33)
  return formatDidKey('ES256K', point)
}

/** public JWK of a secp256k1 keypair */
export function k256PublicJwk(keypair: Keypair): JWK {
  const { keyBytes } = parseDidKey(keypair.did()) // uncompressed 0x04 || x || y
  return {
    kty: 'EC',
    crv: 'secp256k1',
    x: base64url.encode(keyBytes.slice(1, 33)),
    y: base64url.encode(keyBytes.slice(33, 65)),
  }
}

export type OAuthKey = { keypair: Keypair; didKey: string; jwk: JWK & { kid: string }; kid: string }

/** the deployment's OAuth signing key (PDS_OAUTH_SIGNING_KEY) from its hex scalar */
export async function loadOAuthKey(hex: string): Promise<OAuthKey> {
  const keypair = await k256Keypair(hex)
  const pub = k256PublicJwk(keypair)
  const kid = await calculateJwkThumbprint(pub, 'sha256')
  return { keypair, didKey: keypair.did(), kid, jwk: { ...pub, alg: 'ES256K', use: 'sig', kid } }
}

export function decodeParts(jwt: string): { header: Record<string, unknown>; payload: Record<string, unknown> } | undefined {
  try {
    return { header: decodeProtectedHeader(jwt), payload: decodeJwt(jwt) }
  } catch {
    return undefined
  }
}
