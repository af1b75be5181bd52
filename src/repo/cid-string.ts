// The text form of binary CIDs without building CID objects: importRepo names every block, node
// and record by its string (the form the store keys on), tens of thousands per call.

const B32 = Uint8Array.from('abcdefghijklmnopqrstuvwxyz234567', (c) => c.charCodeAt(0))
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
