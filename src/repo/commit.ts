// Builds and signs the next commit of a repository from its current MST, exactly as
// @atproto/repo's Repo.formatCommit does (same blocks, same CIDs, same signature input), but from
// a tree the caller may already hold in memory (tree-cache.ts) and from record bytes already
// encoded when the write was prepared, so nothing is read or encoded twice.
import { TID } from '@atproto/common'
import type { Keypair } from '@atproto/crypto'
import { encode } from '@atproto/lex-cbor'
import type { Cid } from '@atproto/lex-data'
import { BlockMap, DataDiff, type MST, type CommitData } from '@atproto/repo'
import { cidForDagCbor } from '../encoding/node-cbor.js'
import { installRepoPatches } from '../patches/repo.js'

installRepoPatches()

export type TreeOp = { action: 'create' | 'update'; key: string; cid: Cid; bytes: Uint8Array } | { action: 'delete'; key: string }

/** the repository as of its current commit */
export type RepoHead = { did: string; cid: Cid; rev: string; data: MST }

export async function buildCommit(head: RepoHead, ops: TreeOp[], keypair: Keypair): Promise<{ commit: CommitData; data: MST }> {
  const leaves = new BlockMap()
  let data = head.data
  for (const op of ops) {
    if (op.action === 'create') {
      leaves.set(op.cid, op.bytes)
      data = await data.add(op.key, op.cid)
    } else if (op.action === 'update') {
      leaves.set(op.cid, op.bytes)
      data = await data.update(op.key, op.cid)
    } else {
      data = await data.delete(op.key)
    }
  }
  const dataCid = await data.getPointer()
  const diff = await DataDiff.of(data, head.data)
  const newBlocks = diff.newMstBlocks
  const removedCids = diff.removedCids
  // the blocks a consumer needs to check each op against the new root (sync 1.1)
  const relevantBlocks = new BlockMap()
  for (const op of ops) relevantBlocks.addMap(await data.getCoveringProof(op.key))
  const added = leaves.getMany(diff.newLeafCids.toList())
  if (added.missing.length > 0) throw new Error(`Missing leaf blocks: ${added.missing}`)
  newBlocks.addMap(added.blocks)
  relevantBlocks.addMap(added.blocks)

  const rev = TID.nextStr(head.rev)
  const unsigned = { did: head.did, version: 3, rev, prev: null, data: dataCid }
  const sig = await keypair.sign(encode(unsigned))
  const commitBytes = encode({ ...unsigned, sig })
  const commitCid = cidForDagCbor(commitBytes)
  if (!commitCid.equals(head.cid)) {
    newBlocks.set(commitCid, commitBytes)
    relevantBlocks.set(commitCid, commitBytes)
    removedCids.add(head.cid)
  }
  return {
    commit: { cid: commitCid, rev, since: head.rev, prev: head.cid, newBlocks, relevantBlocks, removedCids },
    data,
  }
}
