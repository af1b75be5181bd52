// Every place this server reaches inside @atproto/repo (pinned to an exact version in
// package.json). Each patch is installed only while the library has exactly the code it was
// written against; test/repo-encoding.nodb.test.ts checks that bytes and CIDs equal the unpatched
// library's, test/library-patches.nodb.test.ts that the internals below keep their shape.
//
// - MST.prototype.serialize: the library serializes an MST node again every time it is asked for
//   its CID or bytes: a commit's diff, its covering proofs (three walks per op) and getPointer each
//   re-encode the same nodes through the generic CBOR encoder. A node's entries never change once
//   it has them (every edit makes a new node), so its serialization is computed once per node, by
//   a direct encoder of the node's fixed shape. Relies on serialize being the one place a node is
//   encoded, and on nodes being immutable.
// - BlockMap.prototype.addMap: a BlockMap keeps its blocks in a private `map` by CID string and
//   parses every CID again when iterated; merging one into another (each covering proof of a
//   commit, its new blocks) copies the strings instead. Relies on `map` and on `set` storing
//   `cid.toString()`; `blockEntries` and `cidStrings` read the same private fields (CidSet's `set`).
import { BlockMap, CidSet, MST } from '@atproto/repo'
import type { Cid } from '@atproto/lex-data'
import { cidForDagCbor, encodeNode } from '../encoding/node-cbor.js'

/** the library's serialize, whitespace-normalized, as of the pinned version */
export const EXPECTED_SERIALIZE = `async serialize() { let entries = await this.getEntries(); const outdated = entries.filter((e) => e.isTree() && e.outdatedPointer); if (outdated.length > 0) { await Promise.all(outdated.map((e) => e.getPointer())); entries = await this.getEntries(); } const data = util.serializeNodeData(entries); const bytes = encode(data); const cid = await cidForCbor(bytes); return { cid, bytes }; }`

export const EXPECTED_BLOCKMAP = {
  set: 'set(cid, bytes) { this.map.set(cid.toString(), bytes); return this; }',
  addMap: 'addMap(toAdd) { for (const [cid, bytes] of toAdd) this.set(cid, bytes); return this; }',
  cidSetAdd: 'add(cid) { this.set.add(cid.toString()); return this; }',
}

const normalize = (src: string) => src.replace(/\s+/g, ' ').trim()

/** a BlockMap's blocks by CID string, without parsing a CID per block */
export function blockEntries(blocks: BlockMap): Map<string, Uint8Array> {
  return blocks['map']
}

/** a CidSet's CIDs as strings, without parsing them */
export function cidStrings(set: CidSet): string[] {
  const strings: Set<string> = set['set']
  return [...strings]
}

/** true when the installed @atproto/repo has exactly the code the patches replace */
export function libraryMatches(): boolean {
  const blocks: unknown = new BlockMap()['map']
  const cids: unknown = new CidSet()['set']
  return (
    normalize(original.toString()) === EXPECTED_SERIALIZE &&
    blocks instanceof Map &&
    cids instanceof Set &&
    normalize(BlockMap.prototype.set.toString()) === EXPECTED_BLOCKMAP.set &&
    normalize(originalAddMap.toString()) === EXPECTED_BLOCKMAP.addMap &&
    normalize(CidSet.prototype.add.toString()) === EXPECTED_BLOCKMAP.cidSetAdd
  )
}

type Serialized = { cid: Cid; bytes: Uint8Array }
const memo = new WeakMap<MST, Serialized>()
// eslint-disable-next-line @typescript-eslint/unbound-method -- always invoked with .call(node)
const original = MST.prototype.serialize
// eslint-disable-next-line @typescript-eslint/unbound-method -- always invoked with .call(into, …)
const originalAddMap = BlockMap.prototype.addMap
let installed = false

/** true once the patches are in place; false when the library is not the expected one */
export function installRepoPatches(): boolean {
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
