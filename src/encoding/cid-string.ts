// The text form of binary CIDs and back without building CID objects: importRepo names every
// block, node and record by its string (the form the store keys on), and getRepo writes every
// stored one back as bytes, tens of thousands per call.
import { parseCid } from '@atproto/lex-data'

const B32 = Uint8Array.from('abcdefghijklmnopqrstuvwxyz234567', (c) => c.charCodeAt(0))
const B32_INDEX = new Int16Array(128).fill(-1)
B32.forEach((c, i) => (B32_INDEX[c] = i))
// characters go to a scratch buffer and become one flat string: a string grown by `+=` per
// character is a rope that every Map lookup on it has to flatten (measured ~20x slower)
const scratch = Buffer.allocUnsafe(1 + Math.ceil((64 * 8) / 5))

/** multibase base32 lower ('b' prefix, no padding) of bytes[start, end): a CIDv1's string */
export function cidString(bytes: Uint8Array, start = 0, end = bytes.length): string {
  const out = end - start <= 64 ? scratch : Buffer.allocUnsafe(2 + Math.ceil(((end - start) * 8) / 5))
  out[0] = 0x62 // b
  let o = 1
  let value = 0
  let bits = 0
  for (let i = start; i < end; i++) {
    value = ((value << 8) | bytes[i]) & 0xfff
    bits += 8
    while (bits >= 5) {
      bits -= 5
      out[o++] = B32[(value >>> bits) & 31]
    }
  }
  if (bits > 0) out[o++] = B32[(value << (5 - bits)) & 31]
  return out.toString('latin1', 0, o)
}

/** the binary CIDv1 (dag-cbor, sha-256) of a digest */
export function dagCborCid(digest: Uint8Array): Uint8Array {
  const out = new Uint8Array(36)
  out.set([0x01, 0x71, 0x12, 0x20])
  out.set(digest, 4)
  return out
}

/**
 * A Map key for binary CID bytes (their latin1 text): one native decode, much cheaper than
 * base32, for lookups; cidString of keyBytes(key) names the block.
 */
export function cidKey(bytes: Uint8Array, start = 0, end = bytes.length): string {
  return asBuffer(bytes).toString('latin1', start, end)
}

const keyScratch = new Uint8Array(64)

/** the CID string of a cidKey */
export function keyToCidString(key: string): string {
  const bytes = key.length <= keyScratch.length ? keyScratch : new Uint8Array(key.length)
  for (let i = 0; i < key.length; i++) bytes[i] = key.charCodeAt(i)
  return cidString(bytes, 0, key.length)
}

export const asBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.length))

/** binary form of a CID string (multibase base32 lower fast path, anything else via parseCid) */
export function cidBytes(cid: string): Uint8Array {
  if (cid.charCodeAt(0) === 0x62 /* b */) {
    const out = new Uint8Array(Math.floor(((cid.length - 1) * 5) / 8))
    if (base32Into(cid, out, 0) >= 0) return out
  }
  return parseCid(cid).bytes
}

/** decodes multibase base32 `cid` (after its `b`) into `out` at `at`; the end offset, or -1 */
export function base32Into(cid: string, out: Uint8Array, at: number): number {
  let bits = 0
  let value = 0
  for (let i = 1; i < cid.length; i++) {
    const c = cid.charCodeAt(i)
    const v = c < 128 ? B32_INDEX[c] : -1
    if (v < 0) return -1
    value = ((value << 5) | v) & 0xffff
    bits += 5
    if (bits >= 8) {
      bits -= 8
      out[at++] = (value >>> bits) & 0xff
    }
  }
  return at
}
