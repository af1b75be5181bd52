// secp256k1 keypairs from their hex scalar. Signing goes through libsecp256k1 (the `secp256k1`
// package's native binding) because a repository commit is signed on every write and
// @atproto/crypto's BigInt code costs several times more; its RFC 6979 nonces and low-S
// normalization give byte for byte the compact r||s signatures @atproto/crypto's Secp256k1Keypair
// makes, and verification stays with @atproto/crypto. Where the binding cannot load (a platform
// without a prebuilt or compiled addon) @atproto/crypto signs.
// Importing derives the public key, so keypairs are cached by their own private material, never
// by DID: a cached entry can never be stale, and the signing_key row is still read on every write.
import { createECDH, createHash, randomBytes } from 'node:crypto'
import { createRequire } from 'node:module'
import { formatDidKey, Secp256k1Keypair, type Keypair } from '@atproto/crypto'
import type * as Libsecp256k1 from 'secp256k1'

// Loaded on the first signature, not at start: the binding costs about 5 MiB of resident memory,
// which an idle server that has not written yet does not need.
let native: typeof Libsecp256k1 | null | undefined

/** the binding itself, never the package's pure-JS fallback (slower than @atproto/crypto) */
function binding(): typeof Libsecp256k1 | null {
  if (native === undefined) {
    try {
      native = createRequire(import.meta.url)('secp256k1/bindings.js') as typeof Libsecp256k1
    } catch {
      native = null
    }
  }
  return native
}

/** which implementation signs: 'libsecp256k1' or '@atproto/crypto' (loads the binding to find out) */
export function k256Backend(): 'libsecp256k1' | '@atproto/crypto' {
  return binding() ? 'libsecp256k1' : '@atproto/crypto'
}

const SCALAR = /^[0-9a-f]{64}$/
const ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n

/** a keypair over a private scalar (32 bytes), signing the sha256 of a message through libsecp256k1 */
class NativeK256Keypair implements Keypair {
  readonly jwtAlg = 'ES256K'
  readonly #privateKey: Uint8Array
  readonly #did: string
  #fallback: Promise<Keypair> | undefined

  constructor(privateKey: Uint8Array) {
    this.#privateKey = privateKey
    // OpenSSL derives the public key without loading the binding
    const ecdh = createECDH('secp256k1')
    ecdh.setPrivateKey(privateKey)
    this.#did = formatDidKey('ES256K', ecdh.getPublicKey(null, 'compressed'))
  }

  did(): string {
    return this.#did
  }

  async sign(msg: Uint8Array): Promise<Uint8Array> {
    const lib = binding()
    if (!lib) {
      this.#fallback ??= Secp256k1Keypair.import(this.#privateKey)
      return (await this.#fallback).sign(msg)
    }
    const digest = createHash('sha256').update(msg).digest()
    return lib.ecdsaSign(digest, this.#privateKey).signature
  }
}

/** a keypair for `hex` (64 hexadecimal characters), signing as Secp256k1Keypair.sign does */
export function importK256(hex: string): Promise<Keypair> {
  const key = hex.toLowerCase()
  if (!SCALAR.test(key)) return Promise.reject(new Error('a secp256k1 private key is 64 hexadecimal characters'))
  // zero or a scalar not below the group order is refused, as @atproto/crypto's import does
  const n = BigInt(`0x${key}`)
  if (n === 0n || n >= ORDER) return Promise.reject(new Error('not a valid secp256k1 private key'))
  try {
    return Promise.resolve(new NativeK256Keypair(Buffer.from(key, 'hex')))
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)))
  }
}

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
