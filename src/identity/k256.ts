// secp256k1 keypairs from their hex scalar. Signing goes through libsecp256k1 (the `secp256k1`
// package's native binding) because a repository commit is signed on every write and
// @atproto/crypto's BigInt code costs several times more; its RFC 6979 nonces and low-S
// normalization give byte for byte the compact r||s signatures @atproto/crypto's Secp256k1Keypair
// makes, and verification stays with @atproto/crypto. Where the binding cannot load (a platform
// without a prebuilt or compiled addon) keypairs are @atproto/crypto's own.
// Importing derives the public key, so keypairs are cached by their own private material, never
// by DID: a cached entry can never be stale, and the signing_key row is still read on every write.
import { createHash, randomBytes } from 'node:crypto'
import { createRequire } from 'node:module'
import { formatDidKey, Secp256k1Keypair, type Keypair } from '@atproto/crypto'
import type * as Libsecp256k1 from 'secp256k1'

/** the binding itself, never the package's pure-JS fallback (slower than @atproto/crypto) */
function loadNative(): typeof Libsecp256k1 | undefined {
  try {
    return createRequire(import.meta.url)('secp256k1/bindings.js') as typeof Libsecp256k1
  } catch {
    return undefined
  }
}

const native = loadNative()

/** which implementation signs: 'libsecp256k1' or '@atproto/crypto' */
export const k256Backend: 'libsecp256k1' | '@atproto/crypto' = native ? 'libsecp256k1' : '@atproto/crypto'

const SCALAR = /^[0-9a-f]{64}$/

/** a keypair over a private scalar (32 bytes), signing the sha256 of a message through libsecp256k1 */
class NativeK256Keypair implements Keypair {
  readonly jwtAlg = 'ES256K'
  readonly #lib: typeof Libsecp256k1
  readonly #privateKey: Uint8Array
  readonly #did: string

  constructor(lib: typeof Libsecp256k1, privateKey: Uint8Array) {
    this.#lib = lib
    this.#privateKey = privateKey
    // throws on zero or a scalar not below the group order, as @atproto/crypto's import does
    this.#did = formatDidKey('ES256K', lib.publicKeyCreate(privateKey, true))
  }

  did(): string {
    return this.#did
  }

  sign(msg: Uint8Array): Promise<Uint8Array> {
    const digest = createHash('sha256').update(msg).digest()
    return Promise.resolve(this.#lib.ecdsaSign(digest, this.#privateKey).signature)
  }
}

/** a keypair for `hex` (64 hexadecimal characters), signing as Secp256k1Keypair.sign does */
export function importK256(hex: string): Promise<Keypair> {
  const key = hex.toLowerCase()
  if (!native) return Secp256k1Keypair.import(key)
  if (!SCALAR.test(key)) return Promise.reject(new Error('a secp256k1 private key is 64 hexadecimal characters'))
  try {
    return Promise.resolve(new NativeK256Keypair(native, Buffer.from(key, 'hex')))
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)))
  }
}

const ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n

/** a fresh random private scalar as hex */
export function newK256Scalar(): string {
  for (;;) {
    const hex = randomBytes(32).toString('hex')
    // only zero or a value at or above the group order (odds about 2^-128) is drawn again
    const n = BigInt(`0x${hex}`)
    if (n > 0n && n < ORDER) return hex
  }
}

const MAX = 1024
const cache = new Map<string, Promise<Keypair>>()

export function k256Keypair(hex: string): Promise<Keypair> {
  const key = hex.toLowerCase()
  let hit = cache.get(key)
  if (hit) {
    // most recently used last, so eviction drops the coldest key
    cache.delete(key)
    cache.set(key, hit)
    return hit
  }
  hit = importK256(key)
  hit.catch(() => cache.delete(key))
  cache.set(key, hit)
  if (cache.size > MAX) cache.delete(cache.keys().next().value as string)
  return hit
}
