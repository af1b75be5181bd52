// A record's value as the JSON text getRecord and listRecords send, made once when the record is
// written and kept on its index row: a read then copies text, whatever the repository's size,
// instead of fetching and decoding a block per record.
//
// One pass over the DAG-CBOR bytes writes the JSON data model directly (a CID as {"$link"}, bytes
// as {"$bytes"}, unpadded base64). Whatever it does not handle the same way as decoding into
// objects and serializing them would (floats, 64-bit integers, other CIDs or tags, keys that are
// not in DAG-CBOR order or that a JS object would reorder, invalid UTF-8, deep nesting) takes that
// slower road instead, so the text is always the same as that road's.
import { isUtf8 } from 'node:buffer'
import { lexToJson } from '@atproto/lexicon'
import { decode as decodeCbor, type TagDecoder } from 'cborg'
import { CID } from 'multiformats/cid'
import { cidString } from '../encoding/cid-string.js'

const MAX_DEPTH = 32

class Defer extends Error {}
const DEFER = new Defer()

/** the record's value as JSON text; throws when the bytes are not a record at all */
export function recordValueJson(bytes: Uint8Array): string {
  return directJson(bytes) ?? JSON.stringify(lexToJson(decodeCbor(bytes, { tags: recordTags }) as never))
}

/** the one-pass writer alone: undefined where it leaves the record to full decoding */
export function directJson(bytes: Uint8Array): string | undefined {
  if (bytes.length === 0 || bytes[0] >> 5 !== 5) return undefined
  const w = new JsonWriter(bytes)
  try {
    w.item(0)
  } catch (err) {
    if (err instanceof Defer) return undefined
    throw err
  }
  return w.pos === bytes.length ? w.out : undefined
}

// DAG-CBOR tag 42 is a CID (after a 0x00 prefix); a record value carries it as {$link}
const recordTags: TagDecoder[] = []
recordTags[42] = (bytes: Uint8Array) => ({ $link: CID.decode(bytes.subarray(1)).toString() })

/** a key a JS object would move ahead of the others: an array index (all digits, no leading 0) */
function isReordered(b: Uint8Array, at: number, len: number): boolean {
  if (len === 0 || len > 10 || (b[at] === 0x30 && len > 1)) return false
  for (let i = at; i < at + len; i++) if (b[i] < 0x30 || b[i] > 0x39) return false
  return true
}

class JsonWriter {
  pos = 0
  out = ''
  private buf: Buffer
  /** where the last text() read its bytes */
  private textStart = 0

  constructor(bytes: Uint8Array) {
    this.buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)
  }

  /** the argument of the head at pos, advancing past it (64-bit and indefinite ones defer) */
  private arg(info: number): number {
    const b = this.buf
    const p = this.pos
    if (info < 24) return info
    if (info === 24) {
      if (p >= b.length) throw DEFER
      this.pos = p + 1
      return b[p]
    }
    if (info === 25) {
      if (p + 2 > b.length) throw DEFER
      this.pos = p + 2
      return (b[p] << 8) | b[p + 1]
    }
    if (info === 26) {
      if (p + 4 > b.length) throw DEFER
      this.pos = p + 4
      return b[p] * 0x1000000 + ((b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3])
    }
    throw DEFER
  }

  /** the text at pos (head included) as a JSON string literal */
  private text(): string {
    const head = this.buf[this.pos++]
    if (head >> 5 !== 3) throw DEFER
    const len = this.arg(head & 31)
    const start = this.pos
    const end = start + len
    if (end > this.buf.length) throw DEFER
    this.pos = end
    this.textStart = start
    const b = this.buf
    // printable ASCII without a quote or backslash is its own literal: nothing to escape
    let plain = true
    for (let i = start; i < end; i++) {
      const c = b[i]
      if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) {
        plain = false
        break
      }
    }
    if (plain) return `"${b.toString('latin1', start, end)}"`
    if (!isUtf8(b.subarray(start, end))) throw DEFER
    return JSON.stringify(b.toString('utf8', start, end))
  }

  item(depth: number): void {
    if (depth > MAX_DEPTH || this.pos >= this.buf.length) throw DEFER
    const b = this.buf
    const head = b[this.pos]
    const major = head >> 5
    const info = head & 31
    switch (major) {
      case 0:
        this.pos++
        this.out += String(this.arg(info))
        return
      case 1:
        this.pos++
        this.out += String(-1 - this.arg(info))
        return
      case 2: {
        this.pos++
        const len = this.arg(info)
        const start = this.pos
        if (start + len > b.length) throw DEFER
        this.pos = start + len
        this.out += `{"$bytes":"${b.toString('base64', start, start + len).replace(/=+$/, '')}"}`
        return
      }
      case 3:
        this.out += this.text()
        return
      case 4: {
        this.pos++
        const n = this.arg(info)
        this.out += '['
        for (let i = 0; i < n; i++) {
          if (i) this.out += ','
          this.item(depth + 1)
        }
        this.out += ']'
        return
      }
      case 5:
        this.pos++
        this.map(this.arg(info), depth)
        return
      case 6: {
        this.pos++
        if (this.arg(info) !== 42) throw DEFER
        // a CIDv1 sha-256 link: bytes(37) = 0x00 || 0x01 codec 0x12 0x20 digest
        const p = this.pos
        if (p + 39 > b.length || b[p] !== 0x58 || b[p + 1] !== 37 || b[p + 2] !== 0 || b[p + 3] !== 0x01) throw DEFER
        if ((b[p + 4] !== 0x71 && b[p + 4] !== 0x55) || b[p + 5] !== 0x12 || b[p + 6] !== 0x20) throw DEFER
        this.pos = p + 39
        this.out += `{"$link":"${cidString(b, p + 3, p + 39)}"}`
        return
      }
      default:
        this.pos++
        if (head === 0xf4) this.out += 'false'
        else if (head === 0xf5) this.out += 'true'
        else if (head === 0xf6) this.out += 'null'
        else throw DEFER
    }
  }

  private map(n: number, depth: number) {
    const b = this.buf
    this.out += '{'
    let prevStart = -1
    let prevLen = 0
    for (let i = 0; i < n; i++) {
      if (this.pos >= b.length) throw DEFER
      const literal = this.text()
      const keyStart = this.textStart
      const keyLen = this.pos - keyStart
      // strictly increasing in DAG-CBOR order (length, then bytes): no duplicates, and the
      // order a decoded object would keep, unless a key is one it reorders or refuses
      if (prevStart >= 0 && compareKeys(b, prevStart, prevLen, keyStart, keyLen) >= 0) throw DEFER
      if (isReordered(b, keyStart, keyLen) || literal === '"__proto__"') throw DEFER
      prevStart = keyStart
      prevLen = keyLen
      if (i) this.out += ','
      this.out += literal
      this.out += ':'
      this.item(depth + 1)
    }
    this.out += '}'
  }
}

function compareKeys(b: Uint8Array, a: number, aLen: number, c: number, cLen: number): number {
  if (aLen !== cLen) return aLen - cLen
  for (let i = 0; i < aLen; i++) if (b[a + i] !== b[c + i]) return b[a + i] - b[c + i]
  return 0
}
