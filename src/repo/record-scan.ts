// The blob references of an imported record without decoding it into objects: one pass over the
// DAG-CBOR bytes that checks them as @ipld/dag-cbor's decoder would (minimal lengths, text map
// keys without duplicates, no indefinite lengths, tag 42 only) and finds what blobRefs() in
// prepare.ts finds. Anything outside the common subset (floats, 64-bit integers, unusual CIDs,
// key orders it cannot check cheaply, deep nesting) answers `undefined`: the caller then decodes
// the record fully, so this scanner never decides that a record is invalid.
import { cidString } from '../encoding/cid-string.js'

const MAX_DEPTH = 32

class Defer extends Error {}
const DEFER = new Defer()

// key and value bytes blobRefs looks at: `$type`, `blob`, `ref`, `cid`, `mimeType`
const enc = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0))
const K_TYPE = enc('$type')
const V_BLOB = enc('blob')
const K_REF = enc('ref')
const K_CID = enc('cid')
const K_MIME = enc('mimeType')
const K_PROTO = enc('__proto__')

/** blob CIDs a record references, or undefined when the record needs a full decode */
export function scanRecord(bytes: Uint8Array): string[] | undefined {
  if (bytes.length === 0 || bytes[0] >> 5 !== 5) return undefined // a record is a map
  const s = new Scanner(bytes)
  try {
    s.item(0)
  } catch (err) {
    if (err instanceof Defer) return undefined
    throw err
  }
  if (s.pos !== bytes.length) return undefined
  return [...new Set(s.blobs)]
}

class Scanner {
  pos = 0
  blobs: string[] = []
  // what the last item() was, for the map that holds it
  private lastText = -1
  private lastTextLen = 0
  private lastLink: string | undefined

  constructor(private buf: Uint8Array) {}

  /** the argument of the head at pos (minimal encoding only), advancing past the head */
  private arg(info: number): number {
    const b = this.buf
    const p = this.pos
    if (info < 24) return info
    if (info === 24) {
      if (p >= b.length || b[p] < 24) throw DEFER
      this.pos = p + 1
      return b[p]
    }
    if (info === 25) {
      if (p + 2 > b.length) throw DEFER
      const v = (b[p] << 8) | b[p + 1]
      if (v < 0x100) throw DEFER
      this.pos = p + 2
      return v
    }
    if (info === 26) {
      if (p + 4 > b.length) throw DEFER
      const v = b[p] * 0x1000000 + ((b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3])
      if (v < 0x10000) throw DEFER
      this.pos = p + 4
      return v
    }
    throw DEFER // 64-bit arguments, indefinite lengths, reserved values
  }

  item(depth: number): void {
    if (depth > MAX_DEPTH || this.pos >= this.buf.length) throw DEFER
    const head = this.buf[this.pos++]
    const major = head >> 5
    const info = head & 31
    this.lastText = -1
    this.lastLink = undefined
    switch (major) {
      case 0:
      case 1:
        this.arg(info)
        return
      case 2:
      case 3: {
        const len = this.arg(info)
        const start = this.pos
        if (start + len > this.buf.length) throw DEFER
        this.pos = start + len
        if (major === 3) {
          this.lastText = start
          this.lastTextLen = len
        }
        return
      }
      case 4: {
        const n = this.arg(info)
        for (let i = 0; i < n; i++) this.item(depth + 1)
        this.lastText = -1
        this.lastLink = undefined
        return
      }
      case 5:
        this.map(this.arg(info), depth)
        return
      case 6: {
        if (this.arg(info) !== 42) throw DEFER
        // a CIDv1 sha-256 link: bytes(37) = 0x00 || 0x01 codec 0x12 0x20 digest
        const b = this.buf
        const p = this.pos
        if (p + 39 > b.length || b[p] !== 0x58 || b[p + 1] !== 37 || b[p + 2] !== 0 || b[p + 3] !== 0x01) throw DEFER
        if ((b[p + 4] !== 0x71 && b[p + 4] !== 0x55) || b[p + 5] !== 0x12 || b[p + 6] !== 0x20) throw DEFER
        this.pos = p + 39
        this.lastLink = cidString(b, p + 3, p + 39)
        return
      }
      default:
        // false, true, null; floats and undefined go through the full decoder
        if (head !== 0xf4 && head !== 0xf5 && head !== 0xf6) throw DEFER
    }
  }

  private map(n: number, depth: number) {
    const b = this.buf
    const blobsBefore = this.blobs.length
    let prevKey = -1
    let prevKeyLen = 0
    let typeIsBlob = false
    let ref: string | undefined
    let cidText: string | undefined
    let mimeIsText = false
    for (let i = 0; i < n; i++) {
      if (this.pos >= b.length || b[this.pos] >> 5 !== 3) throw DEFER // DAG-CBOR keys are text
      this.item(depth + 1)
      const key = this.lastText
      const keyLen = this.lastTextLen
      // ASCII keys only: two invalid UTF-8 keys could decode to one string (a duplicate)
      for (let j = key; j < key + keyLen; j++) if (b[j] >= 0x80) throw DEFER
      // strictly increasing in DAG-CBOR order (length, then bytes) rules out duplicates
      if (prevKey >= 0 && compareKeys(b, prevKey, prevKeyLen, key, keyLen) >= 0) throw DEFER
      if (equals(b, key, keyLen, K_PROTO)) throw DEFER
      prevKey = key
      prevKeyLen = keyLen
      this.item(depth + 1)
      if (equals(b, key, keyLen, K_TYPE)) typeIsBlob = this.lastText >= 0 && equals(b, this.lastText, this.lastTextLen, V_BLOB)
      else if (equals(b, key, keyLen, K_REF)) ref = this.lastLink
      else if (equals(b, key, keyLen, K_CID)) cidText = this.lastText >= 0 ? text(b, this.lastText, this.lastTextLen) : undefined
      else if (equals(b, key, keyLen, K_MIME)) mimeIsText = this.lastText >= 0
    }
    this.lastText = -1
    this.lastLink = undefined
    // a blob object is not searched further (blobRefs stops there too)
    if (typeIsBlob && ref !== undefined) {
      this.blobs.length = blobsBefore
      this.blobs.push(ref)
    } else if (n === 2 && cidText !== undefined && mimeIsText) {
      this.blobs.length = blobsBefore
      this.blobs.push(cidText)
    }
  }
}

function compareKeys(b: Uint8Array, a: number, aLen: number, c: number, cLen: number): number {
  if (aLen !== cLen) return aLen - cLen
  for (let i = 0; i < aLen; i++) if (b[a + i] !== b[c + i]) return b[a + i] - b[c + i]
  return 0
}

function equals(b: Uint8Array, at: number, len: number, want: Uint8Array): boolean {
  if (len !== want.length) return false
  for (let i = 0; i < len; i++) if (b[at + i] !== want[i]) return false
  return true
}

function text(b: Uint8Array, at: number, len: number): string {
  return Buffer.from(b.buffer, b.byteOffset + at, len).toString('utf8')
}
