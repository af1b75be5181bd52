// secp256k1 (ES256K) signing and verification on node:crypto (OpenSSL) instead of the pure-JS
// @noble/curves behind @atproto/crypto: the same signatures, accepted by the same verifiers, at a
// fraction of the CPU (every repository commit is signed; every OAuth access token is verified).
// Signatures are compact R||S, normalized to low S (what @atproto/crypto produces and requires).
// Keys are cached by their own material (private scalar / did:key), never by DID, so a cached
// entry can never be stale: the signing_key row is still read on every write.
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto'
import { parseDidKey, Secp256k1Keypair, type Keypair } from '@atproto/crypto'

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
const HALF_N = N >> 1n

const bigFrom = (b: Uint8Array) => BigInt(`0x${Buffer.from(b).toString('hex') || '0'}`)
const to32 = (n: bigint) => Buffer.from(n.toString(16).padStart(64, '0'), 'hex')

/** a small insertion-ordered LRU */
class Lru<V> {
  private map = new Map<string, V>()
  constructor(private max: number) {}
  get(k: string): V | undefined {
    const v = this.map.get(k)
    if (v !== undefined) {
      this.map.delete(k)
      this.map.set(k, v)
    }
    return v
  }
  set(k: string, v: V) {
    this.map.delete(k)
    this.map.set(k, v)
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as string)
  }
}

// SEC1 ECPrivateKey for secp256k1 without the public key: OpenSSL derives it
const SEC1_PREFIX = Buffer.from('302e0201010420', 'hex')
const SEC1_SUFFIX = Buffer.from('a00706052b8104000a', 'hex')

export class NodeK256Keypair implements Keypair {
  jwtAlg = 'ES256K'
  private constructor(
    private key: KeyObject,
    private didKey: string,
  ) {}

  static async fromHex(hex: string): Promise<NodeK256Keypair> {
    if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new Error('a secp256k1 private key is 32 bytes of hex')
    const key = createPrivateKey({ key: Buffer.concat([SEC1_PREFIX, Buffer.from(hex, 'hex'), SEC1_SUFFIX]), format: 'der', type: 'sec1' })
    // the did:key from @atproto/crypto itself, once per key
    const didKey = (await Secp256k1Keypair.import(hex)).did()
    return new NodeK256Keypair(key, didKey)
  }

  did(): string {
    return this.didKey
  }

  async sign(msg: Uint8Array): Promise<Uint8Array> {
    const sig = sign('sha256', msg, { key: this.key, dsaEncoding: 'ieee-p1363' })
    const s = bigFrom(sig.subarray(32))
    if (s > HALF_N) to32(N - s).copy(sig, 32)
    return new Uint8Array(sig.buffer, sig.byteOffset, sig.length)
  }
}

const keypairs = new Lru<Promise<NodeK256Keypair>>(1024)

/** the keypair of a private key in hex (cached by the key itself) */
export function k256Keypair(hex: string): Promise<NodeK256Keypair> {
  let kp = keypairs.get(hex)
  if (!kp) {
    kp = NodeK256Keypair.fromHex(hex)
    kp.catch(() => {})
    keypairs.set(hex, kp)
  }
  return kp
}

const publicKeys = new Lru<KeyObject | null>(4096)

function publicKeyOf(didKey: string): KeyObject | null {
  let key = publicKeys.get(didKey)
  if (key === undefined) {
    try {
      const { jwtAlg, keyBytes } = parseDidKey(didKey) // uncompressed 0x04 || x || y
      key =
        jwtAlg === 'ES256K' && keyBytes.length === 65
          ? createPublicKey({
              key: {
                kty: 'EC',
                crv: 'secp256k1',
                x: Buffer.from(keyBytes.subarray(1, 33)).toString('base64url'),
                y: Buffer.from(keyBytes.subarray(33, 65)).toString('base64url'),
              },
              format: 'jwk',
            })
          : null
    } catch {
      key = null
    }
    publicKeys.set(didKey, key)
  }
  return key
}

/**
 * true when `sig` (compact R||S) is a valid ES256K signature of `msg` by `didKey`; a high-S
 * signature is refused unless `allowMalleable`. Returns undefined when `didKey` is not a
 * secp256k1 did:key (the caller decides what to do with other key types).
 */
export function verifyK256(didKey: string, msg: Uint8Array, sig: Uint8Array, opts: { allowMalleable?: boolean } = {}): boolean | undefined {
  const key = publicKeyOf(didKey)
  if (!key) return undefined
  if (sig.length !== 64) return false
  const r = bigFrom(sig.subarray(0, 32))
  const s = bigFrom(sig.subarray(32))
  if (r === 0n || s === 0n || r >= N || s >= N) return false
  if (!opts.allowMalleable && s > HALF_N) return false
  try {
    return verify('sha256', msg, { key, dsaEncoding: 'ieee-p1363' }, sig)
  } catch {
    return false
  }
}
