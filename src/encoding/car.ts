// A CAR v1 writer straight from stored rows (CID strings and block bytes): no CID objects, no
// per-block async steps; output in ~64 KiB chunks. Byte-for-byte what @atproto/repo's
// writeCarStream produces: a DAG-CBOR header {roots: [root], version: 1}, then per block
// varint(len(cid) + len(bytes)) || cid || bytes.
import { base32Into, cidBytes } from './cid-string.js'

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
  const car = new CarWriter(root)
  for (const row of rows) car.add(row.cid, row.content)
  yield* car.end()
}

/**
 * A CAR built block by block as rows are read, so the rows need not be held: CIDs in base32 are
 * decoded straight into the output, the rest through cidBytes.
 */
export class CarWriter {
  private chunks: Buffer[] = []
  private buf = Buffer.allocUnsafe(CHUNK)
  private at = 0

  constructor(root: string) {
    this.chunks.push(header(cidBytes(root)))
  }

  /** `content`: the block's bytes, or their hex (what a database hands over without a Buffer per row) */
  add(cid: string, content: Uint8Array | string) {
    const contentLen = typeof content === 'string' ? content.length >>> 1 : content.length
    let bin = cid.charCodeAt(0) === 0x62 /* b */ ? undefined : cidBytes(cid)
    const cidLen = bin ? bin.length : Math.floor(((cid.length - 1) * 5) / 8)
    this.reserve(cidLen + contentLen + 10)
    const start = this.at
    let at = varint(cidLen + contentLen, this.buf, start)
    at = bin ? this.put(bin, at) : base32Into(cid, this.buf, at)
    if (at < 0) {
      // not plain base32 after all: the slow way
      bin = cidBytes(cid)
      this.at = start
      this.reserve(bin.length + contentLen + 10)
      at = this.put(bin, varint(bin.length + contentLen, this.buf, this.at))
    }
    this.at = typeof content === 'string' ? at + this.buf.write(content, at, 'hex') : this.put(content, at)
  }

  private put(bytes: Uint8Array, at: number) {
    this.buf.set(bytes, at)
    return at + bytes.length
  }

  private reserve(need: number) {
    if (this.at + need <= this.buf.length) return
    if (this.at > 0) this.chunks.push(this.buf.subarray(0, this.at))
    this.buf = Buffer.allocUnsafe(Math.max(CHUNK, need))
    this.at = 0
  }

  /** the chunks completed so far (with `all`, the one being filled too), handed over once */
  take(all = false): Buffer[] {
    if (all && this.at > 0) {
      this.chunks.push(this.buf.subarray(0, this.at))
      this.buf = this.buf.subarray(this.at)
      this.at = 0
    }
    return this.chunks.splice(0)
  }

  /** the chunks of the whole CAR; the writer is done */
  end(): Buffer[] {
    if (this.at > 0) this.chunks.push(this.buf.subarray(0, this.at))
    this.at = 0
    this.buf = Buffer.alloc(0)
    return this.chunks
  }
}
