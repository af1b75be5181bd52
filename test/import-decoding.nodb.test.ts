// The decoders behind importRepo (car-blocks, mst-walk, record-scan) against @atproto/repo and
// @ipld/dag-cbor on the same input, and their refusals of broken input.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Secp256k1Keypair } from '@atproto/crypto'
import { TID } from '@atproto/common'
import { BlockMap, blocksToCarFile, MemoryBlockstore, Repo, WriteOpAction } from '@atproto/repo'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import { describe, expect, it } from 'vitest'
import { CarError, parseCar, readCarBlocks } from '../src/encoding/car-blocks.js'
import { cidKey, cidString, keyToCidString } from '../src/encoding/cid-string.js'
import { MstError, walkMst } from '../src/repo/mst-walk.js'
import { blobRefs } from '../src/repo/prepare.js'
import { scanRecord } from '../src/repo/record-scan.js'

const blobCid = async (s: string) => CID.createV1(0x55, await sha256.digest(new TextEncoder().encode(s)))
const leaf = await blobCid('leaf')
const cidOf = async (bytes: Uint8Array) => CID.createV1(dagCbor.code, await sha256.digest(bytes))

async function repoOf(n: number) {
  const storage = new MemoryBlockstore()
  const keypair = await Secp256k1Keypair.create()
  const writes = []
  for (let i = 0; i < n; i++) {
    const record: Record<string, any> = { $type: 'app.bsky.feed.post', text: `post ${i}`, createdAt: new Date().toISOString() }
    if (i % 3 === 0)
      record.embed = {
        $type: 'app.bsky.embed.images',
        images: [{ alt: '', image: { $type: 'blob', ref: await blobCid(`b${i % 5}`), mimeType: 'image/png', size: 10 } }],
      }
    writes.push({
      action: WriteOpAction.Create as const,
      collection: i % 2 ? ('app.bsky.feed.post' as const) : ('app.bsky.feed.like' as const),
      rkey: TID.nextStr(),
      record,
    })
  }
  const repo = await Repo.create(storage, 'did:example:alice', keypair, writes)
  return { repo, storage, car: Buffer.from(await blocksToCarFile(repo.cid, storage.blocks)) }
}

const carOf = async (root: CID, blocks: BlockMap) => Buffer.from(await blocksToCarFile(root as never, blocks))

describe('CAR block reader', () => {
  it('reads every block of a repository CAR under its CID string', async () => {
    const { repo, storage, car } = await repoOf(30)
    const parsed = await parseCar(car)
    expect(parsed.roots).toEqual([cidKey(repo.cid.bytes)])
    expect(parsed.blocks.size).toBe(storage.blocks.size)
    storage.blocks.forEach((bytes, cid) => expect(Buffer.compare(parsed.blocks.get(cidKey(cid.bytes))!, Buffer.from(bytes))).toBe(0))
  })

  it('refuses a block whose bytes do not hash to its CID', async () => {
    const { repo, storage } = await repoOf(3)
    const tampered = new BlockMap()
    storage.blocks.forEach((bytes, cid) => tampered.set(cid, cid.equals(repo.cid) ? new Uint8Array([...bytes, 0]) : bytes))
    await expect(parseCar(await carOf(repo.cid as never, tampered))).rejects.toThrow(/Not a valid CID/)
  })

  it('refuses truncated input, a bad header and CIDs it cannot verify', async () => {
    const { car } = await repoOf(3)
    await expect(parseCar(car.subarray(0, car.length - 5))).rejects.toThrow(CarError)
    await expect(parseCar(Buffer.alloc(0))).rejects.toThrow(CarError)
    await expect(parseCar(Buffer.from([0x02, 0xa0, 0x00]))).rejects.toThrow(CarError)
    // a sha-512 CID
    const withOdd = Buffer.from(car)
    const headerEnd = 1 + car[0]
    const blockStart = headerEnd + 1 + (car[headerEnd] >= 0x80 ? 1 : 0)
    withOdd[blockStart + 2] = 0x13
    await expect(parseCar(withOdd)).rejects.toThrow(/Unsupported CID/)
  })
  it('refuses a CAR denser than any repository before reading it all', async () => {
    const { repo } = await repoOf(1)
    const tiny = await Promise.all(
      Array.from({ length: 5000 }, async (_, i) => {
        const bytes = new Uint8Array([i & 0xff, i >> 8])
        return [CID.createV1(0x55, await sha256.digest(bytes)), bytes] as const
      }),
    )
    const blocks = new BlockMap()
    for (const [cid, bytes] of tiny) blocks.set(cid, bytes)
    await expect(parseCar(await carOf(repo.cid as never, blocks))).rejects.toThrow(/Too many blocks/)
  })

  it('spills a large CAR to disk and reads every block back', async () => {
    const blocks = new BlockMap()
    const all: [CID, Uint8Array][] = []
    for (let i = 0; i < 60_000; i++) {
      const bytes = randomBytes(300 + (i % 200))
      const cid = CID.createV1(0x55, await sha256.digest(bytes))
      blocks.set(cid, bytes)
      all.push([cid, bytes])
    }
    const car = await carOf(all[0][0], blocks)
    expect(car.length).toBeGreaterThan(24 * 1024 * 1024)
    const dir = mkdtempSync(join(tmpdir(), 'car-spool-'))
    // in uneven chunks, as a socket delivers them
    const chunks: Buffer[] = []
    for (let at = 0; at < car.length; at += 65_521) chunks.push(car.subarray(at, at + 65_521))
    const parsed = await readCarBlocks(chunks, { spoolDir: dir })
    try {
      expect(parsed.blocks.size).toBe(all.length)
      for (const [cid, bytes] of all) expect(Buffer.compare(parsed.blocks.get(cidKey(cid.bytes))!, Buffer.from(bytes))).toBe(0)
      // the spool file is unlinked as soon as it is opened
      expect(readdirSync(dir)).toEqual([])
    } finally {
      parsed.blocks.close()
    }
  })
})

describe('MST walker', () => {
  it('finds the leaves and nodes @atproto/repo finds, in key order', async () => {
    const { repo, storage } = await repoOf(200)
    const get = (key: string) => storage.blocks.get(CID.decode(Buffer.from(key, 'latin1'))) ?? undefined
    const walked = walkMst(cidKey(repo.data.pointer.bytes), get)
    const leaves = await repo.data.leaves()
    expect(walked.leaves).toEqual(leaves.map((l) => ({ key: l.key, cid: cidKey(l.value.bytes) })))
    const nodes = new Set<string>()
    for (const n of await repo.data.allNodes()) if (n.isTree()) nodes.add(cidKey((await n.getPointer()).bytes))
    expect(new Set(walked.nodes)).toEqual(nodes)
  })

  it('names a missing node', async () => {
    const { repo, storage } = await repoOf(200)
    const root = cidKey(repo.data.pointer.bytes)
    const stored = (key: string) => storage.blocks.get(CID.decode(Buffer.from(key, 'latin1'))) ?? undefined
    const child = walkMst(root, stored).nodes[1]
    expect(() => walkMst(root, (key) => (key === child ? undefined : stored(key)))).toThrow(
      new MstError(`missing block ${keyToCidString(child)}`),
    )
  })

  const single = async (node: unknown) => {
    const bytes = dagCbor.encode(node)
    const cid = cidKey((await cidOf(bytes)).bytes)
    return () => walkMst(cid, (c) => (c === cid ? bytes : undefined))
  }
  const k = (s: string) => new TextEncoder().encode(s)

  it('refuses malformed nodes', async () => {
    for (const bad of [
      { hello: 'world' },
      [1, 2],
      { l: null },
      { l: 'bafy', e: [] },
      { l: null, e: [{ p: 0, k: k('a/b'), v: 'not a link', t: null }] },
      { l: null, e: [{ p: 0, k: 'a/b', v: leaf, t: null }] },
      { l: null, e: [{ p: -1, k: k('a/b'), v: leaf, t: null }] },
      { l: null, e: [{ p: 0, k: k('a/b'), v: leaf }] },
    ]) {
      expect(await single(bad), JSON.stringify(bad)).toThrow(/is not an MST node/)
    }
    const notCbor = new Uint8Array([0xff, 0x00])
    const cid = cidKey((await cidOf(notCbor)).bytes)
    expect(() => walkMst(cid, () => notCbor)).toThrow(/not DAG-CBOR/)
  })

  it('refuses invalid, unordered and duplicate keys, and over-long prefixes', async () => {
    const e = (p: number, key: string) => ({ p, k: k(key), v: leaf, t: null })
    expect(await single({ l: null, e: [e(0, 'nocollection')] })).toThrow(/Not a valid MST key/)
    expect(await single({ l: null, e: [e(0, 'a/b/c')] })).toThrow(/Not a valid MST key/)
    expect(await single({ l: null, e: [e(0, 'a/b c')] })).toThrow(/Not a valid MST key/)
    expect(await single({ l: null, e: [e(0, 'a/c'), e(2, 'b')] })).toThrow(/out of order/)
    expect(await single({ l: null, e: [e(0, 'a/c'), e(3, '')] })).toThrow(/out of order/)
    expect(await single({ l: null, e: [e(0, 'a/c'), e(9, 'd')] })).toThrow(/prefix longer/)
    expect((await single({ l: null, e: [e(0, 'a/c'), e(2, 'd')] }))().leaves.map((l) => l.key)).toEqual(['a/c', 'a/d'])
  })

  it('reads a node in another valid layout through the generic decoder', async () => {
    // {l: null, e: [{k, p, t, v}]} with `l` first and `v` before `k`: valid DAG-CBOR keys, another order
    const entry = [
      0xa4,
      0x61,
      0x76,
      0xd8,
      0x2a,
      0x58,
      0x25,
      0x00,
      ...leaf.bytes,
      0x61,
      0x6b,
      0x43,
      ...k('a/b'),
      0x61,
      0x70,
      0x00,
      0x61,
      0x74,
      0xf6,
    ]
    const bytes = new Uint8Array([0xa2, 0x61, 0x6c, 0xf6, 0x61, 0x65, 0x81, ...entry])
    const cid = cidKey((await cidOf(bytes)).bytes)
    expect(walkMst(cid, () => bytes).leaves).toEqual([{ key: 'a/b', cid: cidKey(leaf.bytes) }])
  })

  it('refuses a subtree reached twice', async () => {
    const sub = dagCbor.encode({ l: null, e: [{ p: 0, k: k('a/a'), v: leaf, t: null }] })
    const subCid = await cidOf(sub)
    const top = dagCbor.encode({ l: subCid, e: [{ p: 0, k: k('b/b'), v: leaf, t: subCid }] })
    const topCid = cidKey((await cidOf(top)).bytes)
    const get = (c: string) => (c === topCid ? top : c === cidKey(subCid.bytes) ? sub : undefined)
    expect(() => walkMst(topCid, get)).toThrow(/appears twice/)
  })
})

describe('record scan', () => {
  const same = (value: unknown) => {
    const bytes = dagCbor.encode(value)
    const fast = scanRecord(bytes)
    expect(fast, JSON.stringify(value)).toBeDefined()
    expect(new Set(fast)).toEqual(new Set(blobRefs(dagCbor.decode(bytes))))
    return fast!
  }

  it('finds the blob references blobRefs finds', async () => {
    const a = await blobCid('a')
    const b = await blobCid('b')
    expect(same({ text: 'no blobs', n: 3, neg: -70000, ok: true, nothing: null, list: [1, 'x', new Uint8Array(3)] })).toEqual([])
    expect(same({ image: { $type: 'blob', ref: a, mimeType: 'image/png', size: 3 } })).toEqual([a.toString()])
    expect(
      same({
        images: [
          { image: { $type: 'blob', ref: a, mimeType: 'x', size: 1 } },
          { image: { $type: 'blob', ref: b, mimeType: 'x', size: 1 } },
          { $type: 'blob', ref: a },
        ],
      }).sort(),
    ).toEqual([a.toString(), b.toString()].sort())
    // the legacy form: exactly {cid, mimeType}
    expect(same({ avatar: { cid: a.toString(), mimeType: 'image/jpeg' } })).toEqual([a.toString()])
    expect(same({ avatar: { cid: a.toString(), mimeType: 'image/jpeg', extra: 1 } })).toEqual([])
    // a blob object is not searched further; a ref that is not a link is not a blob
    expect(same({ x: { $type: 'blob', ref: a, inner: { $type: 'blob', ref: b } } })).toEqual([a.toString()])
    expect(same({ x: { $type: 'blob', ref: a.toString(), inner: { $type: 'blob', ref: b } } })).toEqual([b.toString()])
    expect(same({ $type: 'app.bsky.feed.post', link: a, text: 'x'.repeat(300) })).toEqual([])
  })

  it('defers to the full decoder on what it does not check', () => {
    const raw = (...bytes: number[]) => new Uint8Array(bytes)
    expect(scanRecord(dagCbor.encode([1, 2]))).toBeUndefined() // not a map
    expect(scanRecord(dagCbor.encode({ f: 1.5 }))).toBeUndefined() // float
    expect(scanRecord(dagCbor.encode({ big: 2 ** 40 }))).toBeUndefined() // 64-bit integer
    expect(scanRecord(raw(0xa1, 0x61, 0x61, 0x18, 0x01))).toBeUndefined() // 1 encoded in two bytes
    expect(scanRecord(raw(0xbf, 0xff))).toBeUndefined() // indefinite map
    expect(scanRecord(raw(0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02))).toBeUndefined() // duplicate key
    expect(scanRecord(raw(0xa1, 0x01, 0x01))).toBeUndefined() // integer key
    expect(scanRecord(raw(0xa1, 0x61, 0x61, 0xc1, 0x01))).toBeUndefined() // tag 1
    expect(scanRecord(raw(0xa1, 0x61, 0x61, 0x01, 0x00))).toBeUndefined() // trailing bytes
    expect(scanRecord(raw(0xa1, 0x61, 0x61, 0x62, 0x61))).toBeUndefined() // truncated
    let deep: unknown = 1
    for (let i = 0; i < 100; i++) deep = { d: deep }
    expect(scanRecord(dagCbor.encode(deep))).toBeUndefined()
  })

  it('agrees with blobRefs on every record of a repository', async () => {
    const { storage, repo } = await repoOf(60)
    for (const l of await repo.data.leaves()) {
      const bytes = storage.blocks.get(l.value)!
      expect(new Set(scanRecord(bytes))).toEqual(new Set(blobRefs(dagCbor.decode(bytes))))
    }
  })

  it('names blobs by the CID strings the store uses', async () => {
    const a = await blobCid('a')
    expect(cidString(a.bytes)).toBe(a.toString())
    expect(keyToCidString(cidKey(a.bytes))).toBe(a.toString())
  })
})
