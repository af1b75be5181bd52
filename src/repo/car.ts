// A CAR v1 writer straight from stored rows (CID strings and block bytes): no CID objects, no
// per-block async steps; output in ~64 KiB chunks. Byte-for-byte what @atproto/repo's
// writeCarStream produces: a DAG-CBOR header {roots: [root], version: 1}, then per block
// varint(len(cid) + len(bytes)) || cid || bytes.
import { parseCid } from '@atproto/lex-data'

const B32 = 'abcdefghijklmnopqrstuvwxyz234567'
const B32_INDEX = new Int16Array(128).fill(-1)
for (let i = 0; i < B32.length; i++) B32_INDEX[B32.charCodeAt(i)] = i

/** binary form of a CID string (multibase base32 lower fast path, anything else via parseCid) */
export function cidBytes(cid: string): Uint8Array {
  if (cid.charCodeAt(0) === 0x62 /* b */) {
    const out = new Uint8Array(Math.floor(((cid.length - 1) * 5) / 8))
    let bits = 0
    let value = 0
    let o = 0
    for (let i = 1; i < cid.length; i++) {
      const c = cid.charCodeAt(i)
      const v = c < 128 ? B32_INDEX[c] : -1
      if (v < 0) return parseCid(cid).bytes
      value = (value << 5) | v
      bits += 5
      if (bits >= 8) {
        bits -= 8
        out[o++] = (value >>> bits) & 0xff
      }
    }
    return out
  }
  return parseCid(cid).bytes
}

function varint(n: number, buf: Buffer, at: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80
    n = Math.floor(n / 128)
  }
  buf[at++] = n
  return at
}

function header(root: Uint8Array): Buffer {
  // {"roots": [CID(root)], "version": 1}: keys in DAG-CBOR order (length first)
  const link = Buffer.concat([Buffer.from([0x00]), root]) // CID tag 42 payload: 0x00 multibase prefix
  const parts = [
    Buffer.from([0xa2, 0x65]),
    Buffer.from('roots'),
    Buffer.from([0x81, 0xd8, 0x2a]),
    link.length < 24 ? Buffer.from([0x40 + link.length]) : Buffer.from([0x58, link.length]),
    link,
    Buffer.from([0x67]),
    Buffer.from('version'),
    Buffer.from([0x01]),
  ]
  const body = Buffer.concat(parts)
  const len = Buffer.alloc(10)
  return Buffer.concat([len.subarray(0, varint(body.length, len, 0)), body])
}

const CHUNK = 64 * 1024

/** the CAR of `rows` rooted at `root`, in chunks */
export function* carChunks(root: string, rows: Iterable<{ cid: string; content: Uint8Array }>): Generator<Buffer> {
  yield header(cidBytes(root))
  let buf = Buffer.allocUnsafe(CHUNK)
  let at = 0
  for (const row of rows) {
    const cid = cidBytes(row.cid)
    const size = cid.length + row.content.length
    const need = size + 10
    if (at + need > buf.length) {
      if (at > 0) yield buf.subarray(0, at)
      buf = Buffer.allocUnsafe(Math.max(CHUNK, need))
      at = 0
    }
    at = varint(size, buf, at)
    buf.set(cid, at)
    at += cid.length
    buf.set(row.content, at)
    at += row.content.length
  }
  if (at > 0) yield buf.subarray(0, at)
}
