// Key material for second factors, derived from the server's JWT secret so an operator has no new
// secret to keep: one key seals TOTP secrets (AES-256-GCM, bound to the account), another keys the
// hashes of sign-in and recovery codes, so the database alone neither reveals nor checks a code.
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import { base32 } from 'multiformats/bases/base32'
import type { Config } from '../../config.js'

type Keys = { seal: Buffer; hash: Buffer }
const derived = new Map<string, Keys>()

function keysOf(config: Pick<Config, 'secrets'>): Keys {
  const secret = config.secrets.jwtSecret
  let keys = derived.get(secret)
  if (!keys) {
    const derive = (info: string) => Buffer.from(hkdfSync('sha256', secret, 'pds-second-factors', info, 32))
    keys = { seal: derive('totp-secret-seal'), hash: derive('code-hash') }
    derived.set(secret, keys)
  }
  return keys
}

/** `v1.<iv>.<ciphertext>.<tag>` (base64url); the DID is the associated data, so a sealed secret
 *  copied onto another account's row does not open */
export function seal(config: Pick<Config, 'secrets'>, did: string, plain: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', keysOf(config).seal, iv)
  cipher.setAAD(Buffer.from(did))
  const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
  return ['v1', iv, ct, cipher.getAuthTag()].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.')
}

/** the plain text, or undefined when the value was tampered with or sealed under another secret */
export function unseal(config: Pick<Config, 'secrets'>, did: string, sealed: string): string | undefined {
  const [v, iv, ct, tag] = sealed.split('.')
  if (v !== 'v1' || !iv || !ct || !tag) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', keysOf(config).seal, Buffer.from(iv, 'base64url'))
    decipher.setAAD(Buffer.from(did))
    decipher.setAuthTag(Buffer.from(tag, 'base64url'))
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8')
  } catch {
    return undefined
  }
}

/** codes people type: 10 characters of RFC 4648 base32 (50 bits), shown as `ABCDE-FGHIJ` */
export function newCode(): string {
  const s = base32.baseEncode(randomBytes(7)).toUpperCase().slice(0, 10)
  return `${s.slice(0, 5)}-${s.slice(5)}`
}

/** what people type back: any case, with or without the dash and spaces */
export const normalizeCode = (code: string) => code.toUpperCase().replace(/[^A-Z2-7]/g, '')

/** the stored form of a code for `did`: a keyed hash, hex */
export const codeHash = (config: Pick<Config, 'secrets'>, did: string, code: string) =>
  createHmac('sha256', keysOf(config).hash)
    .update(`${did}\n${normalizeCode(code)}`)
    .digest('hex')

/** constant-time equality of two hex hashes */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex')
  const y = Buffer.from(b, 'hex')
  return x.length === y.length && timingSafeEqual(x, y)
}

/** a stable opaque WebAuthn user handle for `did`: no personal data, same for each of its passkeys */
export const userHandleOf = (config: Pick<Config, 'secrets'>, did: string) =>
  createHmac('sha256', keysOf(config).hash).update(`webauthn-user\n${did}`).digest().subarray(0, 32)
