// A permissioned repo as a CAR v1: two roots, the signed commit's block then the index's (a
// DAG-CBOR map `{collection}/{rkey}` -> record CID), then one block per record in the index's key
// order. There is no tree: the index is authenticated by folding its entries into an LtHash and
// comparing the digest with the commit's `hash`, so an index-only CAR (excludeValues) still proves
// which records exist.
import { createHash } from 'node:crypto'
import { CarBufferReader } from '@ipld/car'
import * as dagCbor from '@ipld/dag-cbor'
import { isValidNsid, isValidRecordKey } from '@atproto/syntax'
import { CID } from 'multiformats/cid'
import { create as digestOf } from 'multiformats/hashes/digest'
import { type SignedCommit, commitFromCbor, commitToCbor, verifyCommit } from './commit.js'
import { LtHash } from './lthash.js'

const SHA256 = 0x12

export type SpaceCarRecord = { collection: string; rkey: string; cid: CID; bytes: Uint8Array }
export type SpaceCarEntry = { collection: string; rkey: string; cid: CID }

export class SpaceCarError extends Error {}

/** canonical DAG-CBOR map key order: shorter first, then bytewise (paths are ASCII) */
export const compareKeys = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)

/** the CIDv1 (dag-cbor, sha-256) of a DAG-CBOR block */
export function dagCborCid(bytes: Uint8Array): CID {
  return CID.createV1(dagCbor.code, digestOf(SHA256, createHash('sha256').update(bytes).digest()))
}

/**
 * The CAR of a repo: `records` carry their bytes unless `excludeValues`, when only `cid` is read.
 * The index holds every record; record blocks follow it in its key order.
 */
export function* spaceCarChunks(
  commit: SignedCommit,
  records: Iterable<SpaceCarEntry & { bytes?: Uint8Array }>,
  excludeValues = false,
): Generator<Uint8Array> {
  const byPath = new Map<string, SpaceCarEntry & { bytes?: Uint8Array }>()
  for (const r of records) byPath.set(`${r.collection}/${r.rkey}`, r)
  const paths = [...byPath.keys()].sort(compareKeys)
  const commitBytes = commitToCbor(commit)
  const indexBytes = dagCbor.encode(Object.fromEntries(paths.map((p) => [p, byPath.get(p)!.cid])))
  const commitCid = dagCborCid(commitBytes)
  const indexCid = dagCborCid(indexBytes)
  const header = dagCbor.encode({ roots: [commitCid, indexCid], version: 1 })
  yield Buffer.concat([varint(header.length), header])
  yield block(commitCid, commitBytes)
  yield block(indexCid, indexBytes)
  if (excludeValues) return
  for (const p of paths) {
    const r = byPath.get(p)!
    if (!r.bytes) throw new RangeError(`record ${p} has no bytes for a CAR with values`)
    yield block(r.cid, r.bytes)
  }
}

export type VerifiedSpaceCar = {
  commit: SignedCommit
  /** every record the index names, in index order */
  entries: SpaceCarEntry[]
  /** the records whose blocks the CAR carried (none for an index-only CAR), in index order */
  records: SpaceCarRecord[]
}

/**
 * What a syncer checks of a CAR it fetched: the roots and blocks in their places, every block
 * hashing to its CID, the commit's signature and MAC, and the LtHash of the index's entries
 * equal to the commit's hash. SpaceCarError (or CommitError from the commit check) otherwise.
 */
export async function verifySpaceCar(
  car: Uint8Array,
  want: { space: string; author: string; didKey: string; rev?: string },
): Promise<VerifiedSpaceCar> {
  let reader: CarBufferReader
  try {
    reader = CarBufferReader.fromBytes(car)
  } catch (err) {
    throw new SpaceCarError(`not a CAR: ${(err as Error).message}`)
  }
  if (reader.version !== 1) throw new SpaceCarError('not a CAR v1')
  const roots = reader.getRoots()
  if (roots.length !== 2) throw new SpaceCarError(`a space CAR has two roots (commit, index), this one has ${roots.length}`)
  const blocks = reader.blocks()
  for (const b of blocks) {
    if (b.cid.version !== 1 || b.cid.code !== dagCbor.code || b.cid.multihash.code !== SHA256)
      throw new SpaceCarError(`block ${b.cid} is not CIDv1 dag-cbor sha-256`)
    if (!dagCborCid(b.bytes).equals(b.cid)) throw new SpaceCarError(`block ${b.cid} does not hash to its CID`)
  }
  if (blocks.length < 2 || !blocks[0].cid.equals(roots[0]) || !blocks[1].cid.equals(roots[1]))
    throw new SpaceCarError('the first two blocks must be the commit and the index, as the roots name them')
  const commit = commitFromCbor(blocks[0].bytes)
  const entries = readIndex(blocks[1].bytes)
  const hash = new LtHash()
  for (const e of entries) hash.addRecord(e.collection, e.rkey, e.cid.toString())
  await verifyCommit(commit, { ...want, hash: hash.digest() })
  const rest = blocks.slice(2)
  if (rest.length !== 0 && rest.length !== entries.length)
    throw new SpaceCarError(`the CAR carries ${rest.length} record blocks for ${entries.length} index entries`)
  const records = rest.map((b, i) => {
    const e = entries[i]
    if (!b.cid.equals(e.cid)) throw new SpaceCarError(`record block ${i} is ${b.cid}, the index names ${e.cid} there`)
    return { ...e, bytes: b.bytes }
  })
  return { commit, entries, records }
}

function readIndex(bytes: Uint8Array): SpaceCarEntry[] {
  let index: unknown
  try {
    index = dagCbor.decode(bytes)
  } catch (err) {
    throw new SpaceCarError(`the index is not DAG-CBOR: ${(err as Error).message}`)
  }
  if (index === null || typeof index !== 'object' || Array.isArray(index) || index instanceof Uint8Array || CID.asCID(index))
    throw new SpaceCarError('the index must be a map')
  // record blocks follow the index's key order, so that order must be the canonical one
  if (!Buffer.from(dagCbor.encode(index)).equals(bytes)) throw new SpaceCarError('the index is not canonical DAG-CBOR')
  return Object.entries(index as Record<string, unknown>).map(([path, link]) => {
    const cid = CID.asCID(link)
    if (!cid) throw new SpaceCarError(`index entry ${path} is not a CID link`)
    const slash = path.indexOf('/')
    const collection = path.slice(0, slash)
    const rkey = path.slice(slash + 1)
    if (slash < 0 || !isValidNsid(collection) || !isValidRecordKey(rkey))
      throw new SpaceCarError(`index key ${path} is not {collection}/{rkey}`)
    return { collection, rkey, cid }
  })
}

function block(cid: CID, bytes: Uint8Array): Uint8Array {
  return Buffer.concat([varint(cid.bytes.length + bytes.length), cid.bytes, bytes])
}

function varint(n: number): Uint8Array {
  const out: number[] = []
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80)
    n = Math.floor(n / 128)
  }
  out.push(n)
  return Uint8Array.from(out)
}
