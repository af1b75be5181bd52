// Reads a repository's Merkle Search Tree straight from a map of blocks (importRepo): every node
// decoded once, links kept as cidKeys (cid-string.ts), leaves returned in key order. Checks what
// @atproto/repo's MST.load + leaves() check (node shape, valid keys) and what a tree must be for
// its leaves to become rows: keys strictly increasing (no duplicates), each node reached once.
import * as cborg from 'cborg'
import * as dagCbor from '@ipld/dag-cbor'
import { asBuffer, cidKey, keyToCidString } from '../encoding/cid-string.js'

export class MstError extends Error {}

export type MstLeaf = { key: string; cid: string }
export type MstContents = { leaves: MstLeaf[]; nodes: string[] }

// a valid tree is ~log4(records) deep; this only bounds recursion on hostile input
const MAX_DEPTH = 128
const MAX_KEY_LENGTH = 1024

/** a tag-42 link, as a cidKey (a class, so a link is never confused with a text value) */
class Link {
  constructor(readonly cid: string) {}
}

const decodeOptions: cborg.DecodeOptions = {
  ...dagCbor.decodeOptions,
  tags: Object.assign([], dagCbor.decodeOptions.tags, {
    42: (bytes: Uint8Array) => {
      // a CIDv1 sha-256 link (0x00 multibase prefix); anything else cannot name a block we hold
      if (!(bytes instanceof Uint8Array) || bytes.length !== 37 || bytes[0] !== 0 || bytes[1] !== 0x01) {
        throw new MstError('unsupported link')
      }
      return new Link(cidKey(bytes, 1))
    },
  }),
}

/** the tree under `root`; CIDs in and out are cidKeys */
export function walkMst(root: string, get: (cid: string) => Uint8Array | undefined): MstContents {
  const leaves: MstLeaf[] = []
  const nodes: string[] = []
  for (const item of mstItems(root, get)) {
    if (item.leaf) leaves.push(item.leaf)
    else nodes.push(item.node)
  }
  return { leaves, nodes }
}

export type MstItem = { node: string; leaf?: undefined } | { leaf: MstLeaf; node?: undefined }

/**
 * The tree under `root`, one node or leaf at a time (leaves in key order), so a caller can act on
 * a large tree without holding it. `firstVisit(cid)` is false for a node already reached (a
 * caller with a compact record of visits passes its own; by default a Set of keys).
 */
export function* mstItems(
  root: string,
  get: (cid: string) => Uint8Array | undefined,
  firstVisit: (cid: string) => boolean = setVisits(),
): Generator<MstItem> {
  let last = ''

  function* visit(cid: string, depth: number): Generator<MstItem> {
    if (depth > MAX_DEPTH) throw new MstError('the tree is too deep')
    const bytes = get(cid)
    if (!bytes) throw new MstError(`missing block ${keyToCidString(cid)}`)
    if (!firstVisit(cid)) throw new MstError(`node ${keyToCidString(cid)} appears twice in the tree`)
    yield { node: cid }
    const node = decodeNode(cid, asBuffer(bytes))
    if (node.l !== null) yield* visit(node.l, depth + 1)
    let prev = ''
    for (const e of node.e) {
      if (e.p > prev.length) throw new MstError(`node ${keyToCidString(cid)}: prefix longer than the previous key`)
      if (e.k.length > MAX_KEY_LENGTH) throw new MstError(`node ${keyToCidString(cid)}: key too long`)
      const key = e.p === 0 ? e.k : prev.slice(0, e.p) + e.k
      if (!isValidKey(key)) throw new MstError(`Not a valid MST key: ${key}`)
      if (key <= last) throw new MstError(`node ${keyToCidString(cid)}: key ${key} is out of order`)
      yield { leaf: { key, cid: e.v } }
      last = key
      prev = key
      if (e.t !== null) yield* visit(e.t, depth + 1)
    }
  }
  yield* visit(root, 0)
}

function setVisits() {
  const seen = new Set<string>()
  return (cid: string) => !seen.has(cid) && !!seen.add(cid)
}

/** a node with its links as cidKeys and each key suffix as latin1 text */
type Entry = { p: number; k: string; v: string; t: string | null }
type Node = { l: string | null; e: Entry[] }

function decodeNode(cid: string, bytes: Buffer): Node {
  const fast = canonicalNode(bytes)
  if (fast) return fast
  let n: any
  try {
    n = cborg.decode(bytes, decodeOptions)
  } catch (err) {
    throw new MstError(`node ${keyToCidString(cid)} is not DAG-CBOR: ${(err as Error).message}`)
  }
  const bad = () => new MstError(`block ${keyToCidString(cid)} is not an MST node`)
  if (!n || typeof n !== 'object' || Array.isArray(n) || !(n.l === null || n.l instanceof Link) || !Array.isArray(n.e)) throw bad()
  for (const e of n.e) {
    if (
      !e ||
      typeof e !== 'object' ||
      !Number.isSafeInteger(e.p) ||
      e.p < 0 ||
      !(e.k instanceof Uint8Array) ||
      !(e.v instanceof Link) ||
      !(e.t === null || e.t instanceof Link)
    ) {
      throw bad()
    }
  }
  return {
    l: n.l?.cid ?? null,
    e: n.e.map((e: any) => ({ p: e.p, k: asBuffer(e.k).toString('latin1'), v: e.v.cid, t: e.t?.cid ?? null })),
  }
}

/**
 * The node as @atproto/repo writes it (canonical DAG-CBOR: {e: [{k, p, t, v}], l}, minimal
 * lengths, CIDv1 sha-256 links), read without a generic decoder; undefined for any other
 * layout, which then goes through cborg and the shape checks above.
 */
function canonicalNode(b: Buffer): Node | undefined {
  let p = 0
  // {"e": array
  if (b[p++] !== 0xa2 || b[p++] !== 0x61 || b[p++] !== 0x65) return undefined
  let n = b[p++]
  if (n >= 0x80 && n <= 0x97) n -= 0x80
  else if (n === 0x98 && b[p] >= 24) n = b[p++]
  else return undefined
  const e: Entry[] = new Array(n)
  for (let i = 0; i < n; i++) {
    // {"k": bytes
    if (b[p++] !== 0xa4 || b[p++] !== 0x61 || b[p++] !== 0x6b) return undefined
    let len = b[p++]
    if (len >= 0x40 && len <= 0x57) len -= 0x40
    else if (len === 0x58 && b[p] >= 24) len = b[p++]
    else if (len === 0x59 && (b[p] << 8) + b[p + 1] >= 256) {
      len = (b[p] << 8) + b[p + 1]
      p += 2
    } else return undefined
    if (p + len > b.length) return undefined
    const k = b.toString('latin1', p, p + len)
    p += len
    // "p": uint
    if (b[p++] !== 0x61 || b[p++] !== 0x70) return undefined
    let prefix = b[p++]
    if (prefix === 0x18 && b[p] >= 24) prefix = b[p++]
    else if (prefix === 0x19 && (b[p] << 8) + b[p + 1] >= 256) {
      prefix = (b[p] << 8) + b[p + 1]
      p += 2
    } else if (!(prefix < 24)) return undefined
    // "t": null or link
    if (b[p++] !== 0x61 || b[p++] !== 0x74) return undefined
    const t = nullOrLink(b, p)
    if (!t) return undefined
    p = t[1]
    // "v": link}
    if (b[p++] !== 0x61 || b[p++] !== 0x76 || !isLink(b, p)) return undefined
    e[i] = { p: prefix, k, v: b.toString('latin1', p + 5, p + 41), t: t[0] }
    p += 41
  }
  // "l": null or link}
  if (b[p++] !== 0x61 || b[p++] !== 0x6c) return undefined
  const l = nullOrLink(b, p)
  return l && l[1] === b.length ? { l: l[0], e } : undefined
}

/** at p: null, or a link (as its binary CID in latin1 text); with the position after it */
function nullOrLink(b: Buffer, p: number): [string | null, number] | undefined {
  if (b[p] === 0xf6) return [null, p + 1]
  return isLink(b, p) ? [b.toString('latin1', p + 5, p + 41), p + 41] : undefined
}

/** tag 42 over bytes(37) = 0x00 || CIDv1 (dag-cbor or raw) sha-256 */
function isLink(b: Uint8Array, p: number): boolean {
  return (
    p + 41 <= b.length &&
    b[p] === 0xd8 &&
    b[p + 1] === 0x2a &&
    b[p + 2] === 0x58 &&
    b[p + 3] === 0x25 &&
    b[p + 4] === 0x00 &&
    b[p + 5] === 0x01 &&
    (b[p + 6] === 0x71 || b[p + 6] === 0x55) &&
    b[p + 7] === 0x12 &&
    b[p + 8] === 0x20
  )
}

// @atproto/repo's isValidMstKey: `collection/rkey`, at most 1024 characters of [a-zA-Z0-9_~\-:.]
const KEY_CHAR = new Uint8Array(128)
for (const c of 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_~-:.') KEY_CHAR[c.charCodeAt(0)] = 1

function isValidKey(key: string): boolean {
  if (key.length > MAX_KEY_LENGTH) return false
  let slash = -1
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i)
    if (c === 0x2f) {
      if (slash >= 0) return false
      slash = i
    } else if (c >= 128 || !KEY_CHAR[c]) return false
  }
  return slash > 0 && slash < key.length - 1
}
