// The MST of a repository's latest commit, kept in memory between writes so the next write does
// not read and decode the root-to-leaf path again. An entry is keyed by the commit CID it belongs
// to and used only when the repository's root row, read under the write lock, still names that
// commit: a write by another process (or an import, a rollback) simply makes it miss. A commit
// CID fixes the whole tree, so an entry is never wrong, only stale.
// Bound: MAX_REPOS repositories (least recently written out first), and a tree that has loaded
// or built MAX_NODES nodes is dropped and read afresh on its next write.
import type { Cid } from '@atproto/lex-data'
import type { MST } from '@atproto/repo'
import type { Db } from '../db/index.js'
import type { SqlRepoStorage } from './storage.js'

const MAX_REPOS = 32
const MAX_NODES = 1000

export type CachedTree = {
  commit: string
  cid: Cid
  rev: string
  data: MST
  /** the store every node of `data` reads through; rebound to each writing transaction */
  storage: SqlRepoStorage
  /** blocks built by commits since this tree was first loaded (with storage.reads, its bound) */
  built: number
}

const caches = new WeakMap<Db, Map<string, CachedTree>>()

function cacheOf(db: Db) {
  let c = caches.get(db)
  if (!c) caches.set(db, (c = new Map()))
  return c
}

/** the cached tree of `did` if it is the one of `commit`; the caller holds the repository's lock */
export function takeTree(db: Db, did: string, commit: string): CachedTree | undefined {
  const c = cacheOf(db)
  const hit = c.get(did)
  // taken out: a write that fails half-way must not leave a tree behind bound to its transaction
  c.delete(did)
  return hit && hit.commit === commit ? hit : undefined
}

export function putTree(db: Db, did: string, tree: { commit: Cid; rev: string; data: MST; storage: SqlRepoStorage; built: number }) {
  if (tree.storage.reads + tree.built > MAX_NODES) return
  const c = cacheOf(db)
  c.delete(did)
  c.set(did, { ...tree, commit: tree.commit.toString(), cid: tree.commit })
  if (c.size > MAX_REPOS) c.delete(c.keys().next().value as string)
}
