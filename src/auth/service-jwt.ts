// Inter-service auth tokens (DECISIONS.md 7): ES256K JWTs signed with the account's repository
// key, so the audience verifies them against the `atproto` key of the issuer's DID document.
// Self-contained on purpose: getServiceAuth (OAuth issue) and service proxying share this shape.
import { randomBytes } from 'node:crypto'
import type { Keypair } from '@atproto/crypto'

export type ServiceJwtInput = {
  /** the account DID (issuer) */
  iss: string
  /** the target service DID, without a #fragment */
  aud: string
  /** the method id the token is good for */
  lxm: string | null
  /** seconds since the epoch; default 60 s from now */
  exp?: number
  keypair: Keypair
}

export const SERVICE_JWT_TTL_S = 60

const b64url = (b: Uint8Array | string) => Buffer.from(b).toString('base64url')

export async function createServiceJwt({ iss, aud, lxm, exp, keypair }: ServiceJwtInput): Promise<string> {
  const iat = Math.floor(Date.now() / 1000)
  const header = { typ: 'JWT', alg: keypair.jwtAlg }
  const claims = {
    iat,
    iss,
    aud,
    exp: exp ?? iat + SERVICE_JWT_TTL_S,
    ...(lxm ? { lxm } : {}),
    jti: randomBytes(16).toString('hex'),
  }
  const signingInput = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`
  const sig = await keypair.sign(Buffer.from(signingInput, 'utf8'))
  return `${signingInput}.${b64url(sig)}`
}
