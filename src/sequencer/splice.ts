// A stored event body is the DAG-CBOR map of the message without `seq` and `time`; a frame needs
// both. Decoding the body and encoding it again took longer than anything else in serving an
// event, so the two entries are written into the stored bytes at their places in DAG-CBOR key
// order instead. Bodies that are not a plain map of text keys take the decode path.
import * as dagCbor from '@ipld/dag-cbor'

/** `body` (a DAG-CBOR map without seq and time) with `seq` and `time` added */
export function withSeqAndTime(body: Uint8Array, seq: number, time: string): Uint8Array {
  return concat(seqAndTimeParts(body, seq, time))
}

/** the same bytes in parts, for a caller that puts them into a larger buffer */
export function seqAndTimeParts(body: Uint8Array, seq: number, time: string): Uint8Array[] {
  return spliceParts(body, seq, time) ?? [dagCbor.encode({ ...dagCbor.decode<Record<string, unknown>>(body), seq, time })]
}

/** the spliced bytes; undefined when `body` is not a map this can walk */
export function spliceSeqAndTime(body: Uint8Array, seq: number, time: string): Uint8Array | undefined {
  const parts = spliceParts(body, seq, time)
  return parts && concat(parts)
}

function spliceParts(body: Uint8Array, seq: number, time: string): Uint8Array[] | undefined {
  const first = body[0]
  if (first >> 5 !== 5) return undefined
  const head = readHead(body, 0)
  if (!head || head.value > 0xffff) return undefined
  const entries = head.value
  const inserts = [
    { key: 'seq', bytes: concat([text('seq'), uint(seq)]) },
    { key: 'time', bytes: concat([text('time'), text(time)]) },
  ]
  const parts: Uint8Array[] = [headBytes(5, entries + 2)]
  let at = head.next
  let next = 0
  for (let i = 0; i < entries; i++) {
    const keyHead = readHead(body, at)
    if (!keyHead || body[at] >> 5 !== 3) return undefined
    const key = Buffer.from(body.buffer, body.byteOffset + keyHead.next, keyHead.value).toString('latin1')
    const end = skip(body, keyHead.next + keyHead.value)
    if (end === undefined) return undefined
    while (next < inserts.length && before(inserts[next].key, key)) parts.push(inserts[next++].bytes)
    if (next < inserts.length && inserts[next].key === key) return undefined
    parts.push(body.subarray(at, end))
    at = end
  }
  if (at !== body.length) return undefined
  while (next < inserts.length) parts.push(inserts[next++].bytes)
  return parts
}

// DAG-CBOR map key order: shorter first, then bytewise (keys here are ASCII)
const before = (a: string, b: string) => a.length < b.length || (a.length === b.length && a < b)

function readHead(b: Uint8Array, at: number): { value: number; next: number } | undefined {
  const info = b[at] & 0x1f
  if (info < 24) return { value: info, next: at + 1 }
  if (info === 24) return { value: b[at + 1], next: at + 2 }
  if (info === 25) return { value: (b[at + 1] << 8) | b[at + 2], next: at + 3 }
  if (info === 26) return { value: ((b[at + 1] << 24) >>> 0) + ((b[at + 2] << 16) | (b[at + 3] << 8) | b[at + 4]), next: at + 5 }
  if (info === 27) {
    const hi = ((b[at + 1] << 24) >>> 0) + ((b[at + 2] << 16) | (b[at + 3] << 8) | b[at + 4])
    const lo = ((b[at + 5] << 24) >>> 0) + ((b[at + 6] << 16) | (b[at + 7] << 8) | b[at + 8])
    return { value: hi * 2 ** 32 + lo, next: at + 9 }
  }
  return undefined
}

/** the offset just past the data item at `at`, or undefined for anything unexpected */
function skip(b: Uint8Array, at: number): number | undefined {
  if (at >= b.length) return undefined
  const major = b[at] >> 5
  if (major === 7) {
    const info = b[at] & 0x1f
    return info < 24 ? at + 1 : info === 25 ? at + 3 : info === 26 ? at + 5 : info === 27 ? at + 9 : undefined
  }
  const h = readHead(b, at)
  if (!h) return undefined
  if (major === 0 || major === 1) return h.next
  if (major === 2 || major === 3) return h.next + h.value <= b.length ? h.next + h.value : undefined
  if (major === 6) return skip(b, h.next)
  let next: number | undefined = h.next
  const items = major === 4 ? h.value : h.value * 2
  for (let i = 0; i < items && next !== undefined; i++) next = skip(b, next)
  return next
}

function headBytes(major: number, n: number): Uint8Array {
  const m = major << 5
  if (n < 24) return Uint8Array.of(m | n)
  if (n < 0x100) return Uint8Array.of(m | 24, n)
  if (n < 0x10000) return Uint8Array.of(m | 25, n >> 8, n & 0xff)
  if (n < 2 ** 32) return Uint8Array.of(m | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
  const hi = Math.floor(n / 2 ** 32)
  const lo = n >>> 0
  return Uint8Array.of(
    m | 27,
    (hi >>> 24) & 0xff,
    (hi >> 16) & 0xff,
    (hi >> 8) & 0xff,
    hi & 0xff,
    (lo >>> 24) & 0xff,
    (lo >> 16) & 0xff,
    (lo >> 8) & 0xff,
    lo & 0xff,
  )
}

const uint = (n: number) => headBytes(0, n)
function text(s: string): Uint8Array {
  const bytes = Buffer.from(s, 'utf8')
  return concat([headBytes(3, bytes.length), bytes])
}

function concat(parts: Uint8Array[]): Uint8Array {
  const b = Buffer.concat(parts)
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
}
