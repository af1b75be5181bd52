// Two shortcuts inside @atproto/repo, each installed only while the library has exactly the code
// they were written against (test/repo-encoding.nodb.test.ts checks that, and that bytes and CIDs
// equal the unpatched library's).
//
// @atproto/repo serializes an MST node again every time it is asked for its CID or bytes: a
// commit's diff, its covering proofs (three walks per op) and getPointer each re-encode the same
// nodes through the generic CBOR encoder. A node's entries never change once it has them (every
// edit makes a new node), so its serialization is computed once per node, by a direct encoder of
// the node's fixed shape.
//
// A BlockMap keeps its blocks by CID string and parses every CID again when iterated; merging one
// into another (each covering proof of a commit, its new blocks) copies the strings instead.
import { hash } from 'node:crypto'
import { BlockMap, CidSet, MST, type NodeEntry } from '@atproto/repo'
import { createCid, type Cid } from '@atproto/lex-data'
import { CborWriter } from './cbor-writer.js'

const DAG_CBOR = 0x71
const SHA2_256 = 0x12

/** the library's serialize, whitespace-normalized, as of @atproto/repo 0.10.x */
export const EXPECTED_SERIALIZE = `async serialize() { let entries = await this.getEntries(); const outdated = entries.filter((e) => e.isTree() && e.outdatedPointer); if (outdated.length > 0) { await Promise.all(outdated.map((e) => e.getPointer())); entries = await this.getEntries(); } const data = util.serializeNodeData(entries); const bytes = encode(data); const cid = await cidForCbor(bytes); return { cid, bytes }; }`

export const EXPECTED_BLOCKMAP = {
  set: 'set(cid, bytes) { this.map.set(cid.toString(), bytes); return this; }',
  addMap: 'addMap(toAdd) { for (const [cid, bytes] of toAdd) this.set(cid, bytes); return this; }',
  cidSetAdd: 'add(cid) { this.set.add(cid.toString()); return this; }',
}

const normalize = (src: string) => src.replace(/\s+/g, ' ').trim()

type BlockMapInternals = { map: Map<string, Uint8Array> }

/** a BlockMap's blocks by CID string, without parsing a CID per block */
export function blockEntries(blocks: BlockMap): Map<string, Uint8Array> {
  return (blocks as unknown as BlockMapInternals).map
}

/** a CidSet's CIDs as strings, without parsing them */
export function cidStrings(set: CidSet): string[] {
  return [...(set as unknown as { set: Set<string> }).set]
}

/** true when the installed @atproto/repo has exactly the code the patches replace */
export function libraryMatches(): boolean {
  const bm = new BlockMap() as unknown as BlockMapInternals
  const cs = new CidSet() as unknown as { set: unknown }
  return (
    normalize(original.toString()) === EXPECTED_SERIALIZE &&
    bm.map instanceof Map &&
    cs.set instanceof Set &&
    normalize(BlockMap.prototype.set.toString()) === EXPECTED_BLOCKMAP.set &&
    normalize(originalAddMap.toString()) === EXPECTED_BLOCKMAP.addMap &&
    normalize(CidSet.prototype.add.toString()) === EXPECTED_BLOCKMAP.cidSetAdd
  )
}

type Serialized = { cid: Cid; bytes: Uint8Array }
const memo = new WeakMap<MST, Serialized>()
const original = MST.prototype.serialize
const originalAddMap = BlockMap.prototype.addMap
let installed = false

/** true once the patches are in place; false when the library is not the expected one */
export function installMstMemo(): boolean {
  if (installed) return true
  if (!libraryMatches()) return false
  BlockMap.prototype.addMap = function (this: BlockMap, toAdd: BlockMap): BlockMap {
    const into = blockEntries(this)
    for (const [cid, bytes] of blockEntries(toAdd)) into.set(cid, bytes)
    return this
  }
  MST.prototype.serialize = async function (this: MST): Promise<Serialized> {
    const hit = memo.get(this)
    if (hit) return hit
    let entries = await this.getEntries()
    const outdated = entries.filter((e) => e.isTree() && e.outdatedPointer)
    if (outdated.length > 0) {
      await Promise.all(outdated.map((e) => (e as MST).getPointer()))
      entries = await this.getEntries()
    }
    const bytes = encodeNode(entries)
    const out = { cid: cidForDagCbor(bytes), bytes }
    memo.set(this, out)
    return out
  }
  installed = true
  return true
}

/** the library's own serialize and addMap, for comparing against */
export const unpatchedSerialize = (node: MST): Promise<Serialized> => original.call(node)
export const unpatchedAddMap = (into: BlockMap, toAdd: BlockMap): BlockMap => originalAddMap.call(into, toAdd)

export function cidForDagCbor(bytes: Uint8Array): Cid {
  const d = hash('sha256', bytes, 'buffer')
  return createCid(DAG_CBOR, SHA2_256, new Uint8Array(d.buffer, d.byteOffset, d.length)) as Cid
}

/**
 * DAG-CBOR of a node `{l: left subtree | null, e: [{p, k, v, t}]}` (mstUtil.serializeNodeData):
 * map keys in DAG-CBOR order (all one byte long, so bytewise): e before l; k, p, t, v.
 */
export function encodeNode(entries: NodeEntry[]): Uint8Array {
  const out = new CborWriter()
  let i = 0
  let left: Cid | null = null
  if (entries[0]?.isTree()) {
    left = entries[0].pointer
    i++
  }
  const items: { p: number; k: string; v: Cid; t: Cid | null }[] = []
  let lastKey = ''
  while (i < entries.length) {
    const leaf = entries[i]
    const next = entries[i + 1]
    if (!leaf.isLeaf()) throw new Error('Not a valid node: two subtrees next to each other')
    i++
    let subtree: Cid | null = null
    if (next?.isTree()) {
      subtree = next.pointer
      i++
    }
    if (!validMstKey(leaf.key)) throw new Error(`Not a valid MST key: ${leaf.key}`)
    const p = prefixLen(lastKey, leaf.key)
    items.push({ p, k: leaf.key.slice(p), v: leaf.value, t: subtree })
    lastKey = leaf.key
  }
  out.byte(0xa2)
  out.key(0x65) // "e"
  out.head(4, items.length)
  for (const it of items) {
    out.byte(0xa4)
    out.key(0x6b) // "k"
    out.head(2, it.k.length)
    out.ascii(it.k)
    out.key(0x70) // "p"
    out.head(0, it.p)
    out.key(0x74) // "t"
    out.cidOrNull(it.t)
    out.key(0x76) // "v"
    out.cidOrNull(it.v)
  }
  out.key(0x6c) // "l"
  out.cidOrNull(left)
  return out.finish()
}

function prefixLen(a: string, b: string): number {
  let i = 0
  while (i < a.length && a[i] === b[i]) i++
  return i
}

const KEY_CHARS = /^[a-zA-Z0-9_~\-:.]+\/[a-zA-Z0-9_~\-:.]+$/
const validMstKey = (key: string) => key.length <= 1024 && KEY_CHARS.test(key)
