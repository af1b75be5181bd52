// secp256k1 keypairs from their hex scalar, through @atproto/crypto (the project signs and verifies
// ES256K only with it). Importing derives the public key, which costs more than a signature, so
// keypairs are cached by their own private material, never by DID: a cached entry can never be
// stale, and the signing_key row is still read on every write.
import { Secp256k1Keypair } from '@atproto/crypto'

const MAX = 1024
const cache = new Map<string, Promise<Secp256k1Keypair>>()

export function k256Keypair(hex: string): Promise<Secp256k1Keypair> {
  const key = hex.toLowerCase()
  let hit = cache.get(key)
  if (hit) {
    // most recently used last, so eviction drops the coldest key
    cache.delete(key)
    cache.set(key, hit)
    return hit
  }
  hit = Secp256k1Keypair.import(key)
  hit.catch(() => cache.delete(key))
  cache.set(key, hit)
  if (cache.size > MAX) cache.delete(cache.keys().next().value as string)
  return hit
}
