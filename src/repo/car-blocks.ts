// A CAR v1 reader for importRepo: one pass over the received bytes, every block's SHA-256 checked
// against its CID (part 2 §4.9 step 2), blocks kept as views into the body (no copies) and keyed
// by cidKey (binary CID as latin1; cid-string.ts). Only what atproto repositories use is accepted: CIDv1, dag-cbor or raw, sha-256.
import { hash } from 'node:crypto'
import { setImmediate } from 'node:timers/promises'
import * as dagCbor from '@ipld/dag-cbor'
import { cidKey, cidString } from './cid-string.js'

export class CarError extends Error {}

/** roots and blocks by cidKey */
export type CarBlocks = { roots: string[]; blocks: Map<string, Buffer> }

const DAG_CBOR = 0x71
const RAW = 0x55
const CID_LEN = 36
// hashing is synchronous: let other requests run between slices of a large CAR
const BLOCKS_PER_SLICE = 2000

export async function readCarBlocks(body: AsyncIterable<Uint8Array>): Promise<CarBlocks> {
  const chunks: Buffer[] = []
  for await (const c of body) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength))
  return parseCar(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks))
}

export async function parseCar(car: Buffer): Promise<CarBlocks> {
  const start = varintEnd(car, 0)
  const headerLen = varintValue
  if (headerLen === 0 || start + headerLen > car.length) throw new CarError('Could not parse the CAR header')
  const roots = header(car.subarray(start, start + headerLen))
  const blocks = new Map<string, Buffer>()
  let at = start + headerLen
  let n = 0
  while (at < car.length) {
    const p = varintEnd(car, at)
    const end = p + varintValue
    if (varintValue < CID_LEN || end > car.length) throw new CarError(`Truncated block at byte ${at}`)
    if (car[p] !== 0x01 || (car[p + 1] !== DAG_CBOR && car[p + 1] !== RAW) || car[p + 2] !== 0x12 || car[p + 3] !== 0x20) {
      throw new CarError(`Unsupported CID at byte ${p} (only CIDv1 dag-cbor or raw with sha-256)`)
    }
    const bytes = car.subarray(p + CID_LEN, end)
    // the key's last 32 characters are the digest; strings, not 12,000 small Buffers, for the GC
    const key = car.toString('latin1', p, p + CID_LEN)
    if (!key.endsWith(hash('sha256', bytes, 'latin1'))) {
      throw new CarError(`Not a valid CID for bytes (${cidString(car, p, p + CID_LEN)})`)
    }
    blocks.set(key, bytes)
    at = end
    if (++n % BLOCKS_PER_SLICE === 0) await setImmediate()
  }
  return { roots, blocks }
}

function header(bytes: Uint8Array): string[] {
  let h: any
  try {
    h = dagCbor.decode(bytes)
  } catch (err) {
    throw new CarError(`Could not parse the CAR header: ${(err as Error).message}`)
  }
  if (!h || h.version !== 1 || !Array.isArray(h.roots)) throw new CarError('Could not parse the CAR header')
  return h.roots.map((r: unknown) => {
    const link = r as { asCID?: unknown; bytes?: Uint8Array }
    if (!link || link.asCID !== link || !(link.bytes instanceof Uint8Array)) throw new CarError('A CAR root is not a CID')
    return cidKey(link.bytes)
  })
}

let varintValue = 0

/** reads the unsigned LEB128 varint (CAR lengths) at `at` into varintValue; returns where it ends */
function varintEnd(buf: Uint8Array, at: number): number {
  let value = 0
  let scale = 1
  for (let i = at; i < buf.length && i < at + 8; i++) {
    const b = buf[i]
    value += (b & 0x7f) * scale
    if (b < 0x80) {
      varintValue = value
      return i + 1
    }
    scale *= 128
  }
  throw new CarError(`Could not parse a length at byte ${at}`)
}
