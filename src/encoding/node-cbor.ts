// DAG-CBOR of an MST node by a direct encoder of its fixed shape, and the CID of DAG-CBOR bytes:
// what the write path uses in place of @atproto/repo's generic encoder (patches/repo.ts).
import { hash } from 'node:crypto'
import type { NodeEntry } from '@atproto/repo'
import { createCid, type Cid } from '@atproto/lex-data'
import { CborWriter } from './cbor-writer.js'

const DAG_CBOR = 0x71
const SHA2_256 = 0x12

export function cidForDagCbor(bytes: Uint8Array): Cid {
  const d = hash('sha256', bytes, 'buffer')
  return createCid(DAG_CBOR, SHA2_256, new Uint8Array(d.buffer, d.byteOffset, d.length))
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
