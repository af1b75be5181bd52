// The two-root repo CAR: its layout, the index-only form, and the checks a syncer makes of one.
import { CarBufferReader } from '@ipld/car'
import * as dagCbor from '@ipld/dag-cbor'
import { Secp256k1Keypair } from '@atproto/crypto'
import { describe, expect, it } from 'vitest'
import { SpaceCarError, compareKeys, dagCborCid, spaceCarChunks, verifySpaceCar } from '../src/space/car.js'
import { CommitError, signCommit, commitToCbor } from '../src/space/commit.js'
import { LtHash } from '../src/space/lthash.js'
import { ALICE, SPACE } from './space-helpers.js'

const REV = '3kd2bxmiyd42b'

function record(collection: string, rkey: string, value: unknown) {
  const bytes = dagCbor.encode({ $type: collection, ...(value as object) })
  return { collection, rkey, cid: dagCborCid(bytes), bytes }
}

const records = [
  record('com.example.forum.post', 'zz', { text: 'long key' }),
  record('com.example.forum.post', 'a', { text: 'first' }),
  record('com.example.forum.like', 'b', { subject: 'x' }),
  record('com.example.forum.post', 'b', { text: 'second' }),
]

async function repo(recs = records, opts: { hash?: Uint8Array } = {}) {
  const key = await Secp256k1Keypair.create()
  const lt = new LtHash()
  for (const r of recs) lt.addRecord(r.collection, r.rkey, r.cid.toString())
  const commit = await signCommit({ space: SPACE, author: ALICE, rev: REV, hash: opts.hash ?? lt.digest(), sign: (b) => key.sign(b) })
  return { key, commit, want: { space: SPACE, author: ALICE, didKey: key.did() } }
}

const car = (chunks: Iterable<Uint8Array>) => new Uint8Array(Buffer.concat([...chunks]))

async function failure(p: Promise<unknown>) {
  try {
    await p
  } catch (err) {
    if (err instanceof SpaceCarError) return 'car'
    if (err instanceof CommitError) return err.reason
    throw err
  }
  return 'verified'
}

describe('space repo CAR', () => {
  it('roots the commit then the index, with record blocks in canonical index order', async () => {
    const { commit, want } = await repo()
    const bytes = car(spaceCarChunks(commit, records))
    const reader = CarBufferReader.fromBytes(bytes)
    const [commitCid, indexCid] = reader.getRoots()
    const blocks = reader.blocks()
    expect(blocks.map((b) => b.cid.toString()).slice(0, 2)).toEqual([commitCid.toString(), indexCid.toString()])
    expect(Buffer.from(blocks[0].bytes).equals(Buffer.from(commitToCbor(commit)))).toBe(true)
    const index = dagCbor.decode<Record<string, unknown>>(blocks[1].bytes)
    const order = ['com.example.forum.post/a', 'com.example.forum.post/b', 'com.example.forum.like/b', 'com.example.forum.post/zz'].sort(
      compareKeys,
    )
    expect(Object.keys(index)).toEqual(order)
    expect(order[0]).toBe('com.example.forum.like/b') // shorter key first
    const byPath = new Map(records.map((r) => [`${r.collection}/${r.rkey}`, r.cid.toString()]))
    expect(blocks.slice(2).map((b) => b.cid.toString())).toEqual(order.map((p) => byPath.get(p)))
    expect(blocks[0].cid.version).toBe(1)

    const verified = await verifySpaceCar(bytes, want)
    expect(verified.entries.map((e) => `${e.collection}/${e.rkey}`)).toEqual(order)
    expect(verified.records.map((r) => r.cid.toString())).toEqual(order.map((p) => byPath.get(p)))
    expect(verified.commit.rev).toBe(REV)
  })

  it('carries only the two root blocks with excludeValues, still authenticated', async () => {
    const { commit, want } = await repo()
    const bytes = car(spaceCarChunks(commit, records, true))
    expect(CarBufferReader.fromBytes(bytes).blocks()).toHaveLength(2)
    const verified = await verifySpaceCar(bytes, want)
    expect(verified.entries).toHaveLength(4)
    expect(verified.records).toEqual([])
  })

  it('exports an empty repo as an empty index that matches the all-zero state', async () => {
    const { commit, want } = await repo([])
    const verified = await verifySpaceCar(car(spaceCarChunks(commit, [])), want)
    expect(verified.entries).toEqual([])
  })

  it('fails a syncer’s check when the index does not add up to the commit hash', async () => {
    const { commit, want } = await repo(records, { hash: new LtHash().digest() })
    expect(await failure(verifySpaceCar(car(spaceCarChunks(commit, records)), want))).toBe('hash')
  })

  it('fails a syncer’s check for a commit signed by someone else', async () => {
    const { commit } = await repo()
    const other = await Secp256k1Keypair.create()
    expect(await failure(verifySpaceCar(car(spaceCarChunks(commit, records)), { space: SPACE, author: ALICE, didKey: other.did() }))).toBe(
      'signature',
    )
  })

  it('fails a syncer’s check for a record block that is not the one the index names', async () => {
    const { commit, want } = await repo()
    const good = car(spaceCarChunks(commit, records))
    const reader = CarBufferReader.fromBytes(good)
    const blocks = reader.blocks()
    // swap two record blocks: each still hashes to its own CID, but the order no longer matches the index
    const swapped = rebuild(reader.getRoots(), [blocks[0], blocks[1], blocks[3], blocks[2], ...blocks.slice(4)])
    expect(await failure(verifySpaceCar(swapped, want))).toBe('car')
    // a block whose bytes do not hash to its CID
    const forged = rebuild(reader.getRoots(), [
      ...blocks.slice(0, 2),
      { cid: blocks[2].cid, bytes: dagCbor.encode({ forged: true }) },
      ...blocks.slice(3),
    ])
    expect(await failure(verifySpaceCar(forged, want))).toBe('car')
    // a missing record block
    expect(await failure(verifySpaceCar(rebuild(reader.getRoots(), blocks.slice(0, -1)), want))).toBe('car')
    // roots in the wrong order
    const [c, i] = reader.getRoots()
    expect(await failure(verifySpaceCar(rebuild([i, c], blocks), want))).toBe('car')
    // one root only
    expect(await failure(verifySpaceCar(rebuild([c], blocks), want))).toBe('car')
  })

  it('refuses bytes that are not a CAR', async () => {
    const { want } = await repo()
    expect(await failure(verifySpaceCar(Uint8Array.of(1, 2, 3), want))).toBe('car')
  })

  it('refuses an index that is not a canonical map of links', async () => {
    const { commit, want } = await repo([])
    const commitBytes = commitToCbor(commit)
    const commitCid = dagCborCid(commitBytes)
    for (const index of [
      dagCbor.encode(['x']),
      dagCbor.encode({ 'com.example.forum.post/a': 'not a link' }),
      dagCbor.encode({ nopath: records[0].cid }),
    ]) {
      const cid = dagCborCid(index)
      const bytes = rebuild(
        [commitCid, cid],
        [
          { cid: commitCid, bytes: commitBytes },
          { cid, bytes: index },
        ],
      )
      expect(await failure(verifySpaceCar(bytes, want))).toBe('car')
    }
  })
})

function rebuild(
  roots: import('multiformats/cid').CID[],
  blocks: { cid: import('multiformats/cid').CID; bytes: Uint8Array }[],
): Uint8Array {
  const varint = (n: number) => {
    const out: number[] = []
    while (n >= 0x80) {
      out.push((n & 0x7f) | 0x80)
      n = Math.floor(n / 128)
    }
    out.push(n)
    return Buffer.from(out)
  }
  const header = dagCbor.encode({ roots, version: 1 })
  const parts = [varint(header.length), header]
  for (const b of blocks) parts.push(varint(b.cid.bytes.length + b.bytes.length), b.cid.bytes, b.bytes)
  return new Uint8Array(Buffer.concat(parts))
}
