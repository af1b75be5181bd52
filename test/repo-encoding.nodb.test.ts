// The write path's shortcuts around @atproto/repo (src/patches/repo.ts, encoding/node-cbor.ts,
// repo/commit.ts) must produce exactly the bytes and CIDs the library itself produces; this fails
// when the installed library changes shape under them.
import { Secp256k1Keypair } from '@atproto/crypto'
import * as dagCbor from '@ipld/dag-cbor'
import { decode as cborDecode, encode } from '@atproto/lex-cbor'
import { cidForCbor, type Cid } from '@atproto/lex-data'
import {
  BlockMap,
  blocksToCarFile,
  Leaf,
  MemoryBlockstore,
  MST,
  mstUtil,
  Repo,
  verifyCommitSig,
  WriteOpAction,
  type RecordWriteOp,
} from '@atproto/repo'
import { expect, it } from 'vitest'
import { cidForDagCbor, encodeNode } from '../src/encoding/node-cbor.js'
import { blockEntries, installRepoPatches, libraryMatches, unpatchedAddMap, unpatchedSerialize } from '../src/patches/repo.js'
import { buildCommit, type TreeOp } from '../src/repo/commit.js'
import { carFile, commitBody, type CommitEvent } from '../src/repo/events.js'
import { describe } from './harness.js'

const DID = 'did:plc:abcdefghijklmnopqrstuvwx'

// deterministic keys and values: a reproducible mix of layers, prefixes and long suffixes
let seed = 7
const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
const key = (i: number) =>
  rand() < 0.2
    ? `app.bsky.feed.post/${'x'.repeat(20 + (i % 40))}${i}`
    : `com.example.${['a', 'bb', 'long.collection.name'][i % 3]}/${(1e12 + i * 7919).toString(32)}`

async function valueCid(i: number) {
  return cidForCbor(encode({ $type: 'com.example.record', i }))
}

async function allNodes(tree: MST): Promise<MST[]> {
  const out: MST[] = [tree]
  for (const e of await tree.getEntries()) if (e.isTree()) out.push(...(await allNodes(e)))
  return out
}

describe('repository encoding shortcuts', () => {
  it('finds the installed library exactly as the patches expect it', () => {
    expect(libraryMatches()).toBe(true)
    expect(installRepoPatches()).toBe(true)
  })

  it('merges block maps like the library does', async () => {
    installRepoPatches()
    const a = new BlockMap()
    const b = new BlockMap()
    for (let i = 0; i < 20; i++) await (i % 2 ? a : b).add({ i })
    await a.add({ i: 4 }) // in both
    const ours = new BlockMap().addMap(a).addMap(b)
    const lib = unpatchedAddMap(unpatchedAddMap(new BlockMap(), a), b)
    expect(ours.entries().map((e) => e.cid.toString())).toEqual(lib.entries().map((e) => e.cid.toString()))
    expect(ours.equals(lib)).toBe(true)
    expect(blockEntries(ours).size).toBe(20)
  })

  it('encodes every node of a changing tree to the bytes and CID the library produces', async () => {
    expect(installRepoPatches()).toBe(true)
    const storage = new MemoryBlockstore()
    let tree = await MST.create(storage)
    const live: string[] = []
    for (let i = 0; i < 1500; i++) {
      const r = rand()
      if (r < 0.75 || live.length === 0) {
        const k = key(i)
        if (live.includes(k)) continue
        tree = await tree.add(k, await valueCid(i))
        live.push(k)
      } else if (r < 0.9) {
        tree = await tree.update(live[Math.floor(rand() * live.length)], await valueCid(-i))
      } else {
        const [k] = live.splice(Math.floor(rand() * live.length), 1)
        tree = await tree.delete(k)
      }
      if (i % 250 === 249) {
        // every node as the library serializes it, given the same children
        await tree.getPointer()
        for (const node of await allNodes(tree)) {
          const ours = await node.serialize()
          const lib = await unpatchedSerialize(node)
          expect(Buffer.from(ours.bytes).equals(Buffer.from(lib.bytes))).toBe(true)
          expect(ours.cid.toString()).toBe(lib.cid.toString())
        }
        // and storing then reloading the tree gives the same root
        const { blocks, root } = await tree.getUnstoredBlocks()
        await storage.putMany(blocks)
        const reloaded = MST.load(storage, root)
        expect((await reloaded.getPointer()).toString()).toBe(root.toString())
        expect((await reloaded.list()).map((l) => l.key)).toEqual([...live].sort())
        tree = reloaded
      }
    }
  })

  it('encodes wide nodes, long keys and large prefixes like the generic encoder', async () => {
    const leaves: Leaf[] = []
    for (let i = 0; i < 300; i++) leaves.push(new Leaf(`com.example.c/${'k'.repeat(i % 300)}${1000 + i}`, await valueCid(i)))
    leaves.sort((a, b) => (a.key < b.key ? -1 : 1))
    const storage = new MemoryBlockstore()
    const child = await MST.create(storage, [new Leaf('a.b/c', await valueCid(1))])
    for (const entries of [
      leaves.slice(0, 1),
      leaves.slice(0, 30),
      leaves,
      [child, ...leaves.slice(0, 5), child, ...leaves.slice(5, 40)],
    ]) {
      const lib = encode(mstUtil.serializeNodeData(entries))
      const ours = encodeNode(entries)
      expect(Buffer.from(ours).equals(Buffer.from(lib))).toBe(true)
      expect(cidForDagCbor(ours).toString()).toBe((await cidForCbor(lib)).toString())
    }
    expect(() => encodeNode([child, child])).toThrow()
    expect(() => encodeNode([new Leaf('no-slash', leaves[0].value)])).toThrow()
  })

  it('commits the same blocks as the library without the patch would', async () => {
    installRepoPatches()
    const keypair = await Secp256k1Keypair.create({ exportable: true })
    const storage = new MemoryBlockstore()
    let repo = await Repo.create(storage, DID, keypair)
    for (let round = 0; round < 5; round++) {
      const ops: RecordWriteOp[] = []
      for (let i = 0; i < 40; i++) {
        const n = round * 100 + i
        ops.push({ action: WriteOpAction.Create, collection: 'com.example.a', rkey: `r${n}` as never, record: { n } })
      }
      const commit = await repo.formatCommit(ops, keypair)
      // every new MST block decodes and re-encodes to itself under the library's encoder
      for (const [cid, bytes] of commit.newBlocks) {
        expect((await cidForCbor(bytes)).toString()).toBe(cid.toString())
      }
      repo = await repo.applyCommit(commit)
    }
    const fresh = await Repo.load(storage, repo.cid)
    const nodes = await allNodes(fresh.data)
    for (const node of nodes) {
      const lib = await unpatchedSerialize(node)
      expect(lib.cid.toString()).toBe((await node.getPointer()).toString())
    }
  })

  it('builds the commit Repo.formatCommit builds, from a cached tree or a fresh one', async () => {
    const keypair = await Secp256k1Keypair.create({ exportable: true })
    const storage = new MemoryBlockstore()
    let repo = await Repo.create(storage, DID, keypair)
    let cachedTree = repo.data
    for (let round = 0; round < 6; round++) {
      const writes: { op: RecordWriteOp; tree: TreeOp }[] = []
      for (let i = 0; i < 30; i++) {
        const record = { $type: 'com.example.a', n: round * 1000 + i }
        const bytes = encode(record)
        const cid = cidForDagCbor(bytes)
        const rkey = `r${(round * 1000 + i) * 7919}`
        writes.push({
          op: { action: WriteOpAction.Create, collection: 'com.example.a', rkey: rkey, record },
          tree: { action: 'create', key: `com.example.a/${rkey}`, cid, bytes },
        })
      }
      if (round > 0) {
        // delete and update records of the previous round
        const prev = (await repo.data.list()).slice(0, 4)
        writes.push({
          op: { action: WriteOpAction.Delete, collection: 'com.example.a', rkey: prev[0].key.split('/')[1] },
          tree: { action: 'delete', key: prev[0].key },
        })
        const record = { $type: 'com.example.a', updated: round }
        const bytes = encode(record)
        writes.push({
          op: { action: WriteOpAction.Update, collection: 'com.example.a', rkey: prev[2].key.split('/')[1], record },
          tree: { action: 'update', key: prev[2].key, cid: cidForDagCbor(bytes), bytes },
        })
      }
      const lib = await repo.formatCommit(
        writes.map((w) => w.op),
        keypair,
      )
      // the same head, once through the tree kept from the last round, once loaded anew
      const built: MST[] = []
      for (const data of [cachedTree, MST.load(storage, repo.commit.data)]) {
        const { commit: ours, data: next } = await buildCommit(
          { did: DID, cid: repo.cid, rev: repo.commit.rev, data },
          writes.map((w) => w.tree),
          keypair,
        )
        const oursCommit = cborDecode(ours.newBlocks.get(ours.cid)!) as Record<string, unknown>
        const libCommit = cborDecode(lib.newBlocks.get(lib.cid)!) as Record<string, unknown>
        expect(String(oursCommit.data)).toBe(String(libCommit.data))
        expect(oursCommit.version).toBe(3)
        expect(oursCommit.prev).toBe(null)
        expect(await verifyCommitSig(oursCommit as never, keypair.did())).toBe(true)
        // the commit block is what the library's encoder makes of the commit
        expect(Buffer.from(encode(oursCommit as never)).equals(Buffer.from(ours.newBlocks.get(ours.cid)!))).toBe(true)
        const others = (m: BlockMap, commitCid: string) =>
          m
            .entries()
            .map((e) => e.cid.toString())
            .filter((c) => c !== commitCid)
        expect(others(ours.newBlocks, ours.cid.toString())).toEqual(others(lib.newBlocks, lib.cid.toString()))
        expect(others(ours.relevantBlocks, ours.cid.toString())).toEqual(others(lib.relevantBlocks, lib.cid.toString()))
        expect(ours.removedCids.toList().map(String).sort()).toEqual(lib.removedCids.toList().map(String).sort())
        expect(ours.since).toBe(lib.since)
        expect(String(await next.getPointer())).toBe(String(oursCommit.data))
        built.push(next)
      }
      repo = await repo.applyCommit(lib)
      // the tree a commit built serves as the next head, as the tree cache keeps it
      cachedTree = built[0]
    }
  })

  it('writes the firehose CAR blocksToCarFile writes', async () => {
    const blocks = new BlockMap()
    let root!: Cid
    for (let i = 0; i < 50; i++) root = await blocks.add({ i, pad: 'x'.repeat(i * 40) })
    expect(Buffer.from(carFile(root, blocks)).equals(Buffer.from(await blocksToCarFile(root, blocks)))).toBe(true)
  })

  it('encodes #commit bodies as @ipld/dag-cbor does', async () => {
    const cid = (i: number) => cidForDagCbor(encode({ i }))
    const car = new Uint8Array(300).fill(7)
    const bodies: CommitEvent[] = [
      { did: DID, rev: '3l2abc', since: null, commit: cid(1), blocks: new BlockMap(), ops: [], prevData: null },
      {
        did: DID,
        rev: '3l2abd',
        since: '3l2abc',
        commit: cid(2),
        blocks: new BlockMap(),
        ops: [
          { action: 'create', path: 'app.bsky.feed.post/3l2abd', cid: cid(3) },
          { action: 'update', path: `com.example.${'long'.repeat(10)}/${'k'.repeat(300)}`, cid: cid(4), prev: cid(5) },
          { action: 'delete', path: 'com.example.a/x', cid: null, prev: cid(6) },
          ...Array.from({ length: 30 }, (_, i) => ({ action: 'create' as const, path: `com.example.a/r${i}`, cid: cid(100 + i) })),
        ],
        prevData: cid(7),
      },
    ]
    for (const ev of bodies) {
      const expected = dagCbor.encode({
        repo: ev.did,
        rev: ev.rev,
        since: ev.since,
        commit: ev.commit,
        blocks: car,
        ops: ev.ops.map((op) => ({ action: op.action, path: op.path, cid: op.cid, ...(op.prev ? { prev: op.prev } : {}) })),
        blobs: [],
        rebase: false,
        tooBig: false,
        ...(ev.prevData ? { prevData: ev.prevData } : {}),
      })
      expect(Buffer.from(commitBody(ev, car)).equals(Buffer.from(expected))).toBe(true)
    }
  })
})
