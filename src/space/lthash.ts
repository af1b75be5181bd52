// The commit digest of a permissioned repo: a lattice (multiset) hash over its records. Each
// element expands through BLAKE3's XOF to 1024 little-endian u16 lanes that are added to (or
// subtracted from) the state mod 2^16, so the digest depends on which records exist, not on the
// order they were written, and a write updates it in constant time.
import { createHash } from 'node:crypto'
import { blake3 } from '@noble/hashes/blake3'

export const LTHASH_BYTES = 2048
const LANES = LTHASH_BYTES / 2
const utf8 = new TextEncoder()

/** the element a record contributes: `{collection}/{rkey}/{cid}` with the CID as its base32 string */
export const recordElement = (collection: string, rkey: string, cid: string) => `${collection}/${rkey}/${cid}`

export class LtHash {
  private lanes = new Uint16Array(LANES)

  /** a copy of `state` (2048 bytes), or the empty state */
  constructor(state?: Uint8Array) {
    if (state === undefined) return
    if (state.length !== LTHASH_BYTES) throw new RangeError(`LtHash state must be ${LTHASH_BYTES} bytes, got ${state.length}`)
    for (let i = 0; i < LANES; i++) this.lanes[i] = state[2 * i] | (state[2 * i + 1] << 8)
  }

  add(element: string | Uint8Array): this {
    return this.fold(element, 1)
  }

  remove(element: string | Uint8Array): this {
    return this.fold(element, -1)
  }

  addRecord(collection: string, rkey: string, cid: string): this {
    return this.add(recordElement(collection, rkey, cid))
  }

  removeRecord(collection: string, rkey: string, cid: string): this {
    return this.remove(recordElement(collection, rkey, cid))
  }

  /** the 2048-byte state, lanes little-endian */
  state(): Uint8Array {
    const out = new Uint8Array(LTHASH_BYTES)
    for (let i = 0; i < LANES; i++) {
      out[2 * i] = this.lanes[i] & 0xff
      out[2 * i + 1] = this.lanes[i] >>> 8
    }
    return out
  }

  /** SHA-256 of the state: the `hash` a signed commit carries */
  digest(): Uint8Array {
    return new Uint8Array(createHash('sha256').update(this.state()).digest())
  }

  isEmpty(): boolean {
    return this.lanes.every((l) => l === 0)
  }

  clone(): LtHash {
    const copy = new LtHash()
    copy.lanes.set(this.lanes)
    return copy
  }

  private fold(element: string | Uint8Array, sign: 1 | -1): this {
    const bytes = typeof element === 'string' ? utf8.encode(element) : element
    const x = blake3(bytes, { dkLen: LTHASH_BYTES })
    // Uint16Array stores wrap mod 2^16, which is the lane arithmetic
    for (let i = 0; i < LANES; i++) this.lanes[i] += sign * (x[2 * i] | (x[2 * i + 1] << 8))
    return this
  }
}
