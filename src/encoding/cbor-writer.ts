// A DAG-CBOR writer for the few fixed shapes the write path encodes directly (MST nodes, firehose
// #commit bodies): every head in its shortest form, map keys written by the caller in DAG-CBOR
// order (shorter keys first, then bytewise).
import type { Cid } from '@atproto/lex-data'

export class CborWriter {
  private buf = new Uint8Array(1024)
  private at = 0

  private room(n: number) {
    if (this.at + n <= this.buf.length) return
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.at + n))
    next.set(this.buf.subarray(0, this.at))
    this.buf = next
  }

  byte(b: number) {
    this.room(1)
    this.buf[this.at++] = b
  }

  /** a one-character text string */
  key(c: number) {
    this.room(2)
    this.buf[this.at++] = 0x61
    this.buf[this.at++] = c
  }

  /** a CBOR head: major type and argument, shortest form */
  head(major: number, n: number) {
    this.room(9)
    const m = major << 5
    if (n < 24) this.buf[this.at++] = m | n
    else if (n < 0x100) {
      this.buf[this.at++] = m | 24
      this.buf[this.at++] = n
    } else if (n < 0x10000) {
      this.buf[this.at++] = m | 25
      this.buf[this.at++] = n >> 8
      this.buf[this.at++] = n & 0xff
    } else {
      this.buf[this.at++] = m | 26
      this.buf[this.at++] = (n >>> 24) & 0xff
      this.buf[this.at++] = (n >> 16) & 0xff
      this.buf[this.at++] = (n >> 8) & 0xff
      this.buf[this.at++] = n & 0xff
    }
  }

  ascii(s: string) {
    this.room(s.length)
    for (let j = 0; j < s.length; j++) this.buf[this.at++] = s.charCodeAt(j)
  }

  /** a text string */
  text(s: string) {
    const len = Buffer.byteLength(s)
    this.head(3, len)
    this.room(len)
    if (len === s.length) this.ascii(s)
    else this.at += Buffer.from(this.buf.buffer, this.buf.byteOffset, this.buf.length).write(s, this.at)
  }

  /** a byte string */
  bytes(b: Uint8Array) {
    this.head(2, b.length)
    this.room(b.length)
    this.buf.set(b, this.at)
    this.at += b.length
  }

  /** tag 42 over the CID's bytes behind the 0x00 multibase prefix, or null */
  cidOrNull(cid: Cid | null) {
    if (cid === null) return this.byte(0xf6)
    const bytes = cid.bytes
    this.room(4 + bytes.length + 9)
    this.buf[this.at++] = 0xd8
    this.buf[this.at++] = 0x2a
    this.head(2, bytes.length + 1)
    this.buf[this.at++] = 0x00
    this.buf.set(bytes, this.at)
    this.at += bytes.length
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.at)
  }
}
