// `#sync` for a repository's current commit: what a relay starts from when an account goes live
// (created, or activated after moving in). The commit it carries must verify against the key the
// DID document names now, so a commit another key signed is replaced first by one over the same
// tree signed with the account's key.
import { TID } from '@atproto/common'
import { encode } from '@atproto/lex-cbor'
import { parseCid } from '@atproto/lex-data'
import { BlockMap, CidSet, def, ensureV3Commit, Repo, verifyCommitSig } from '@atproto/repo'
import { appendSyncEvent } from './events.js'
import { cidForDagCbor } from '../encoding/node-cbor.js'
import { SqlRepoStorage } from './storage.js'
import type { Tx } from '../db/store.js'
import { lockRoot, signingKeyFor } from './writer.js'

/** appends `#sync` for `did`'s current commit (inside the caller's transaction); returns its rev */
export async function syncCurrentCommit(trx: Tx, did: string): Promise<string> {
  const root = await lockRoot(trx, did)
  const keypair = await signingKeyFor(trx, did)
  const storage = new SqlRepoStorage(trx, did)
  if (!root) {
    // an account that moved in without importing anything: its repository starts empty here
    const init = await Repo.formatInitCommit(storage, did, keypair)
    await storage.applyCommit(init)
    await appendSyncEvent(trx, did, init.rev, init.cid, init.newBlocks.get(init.cid)!)
    return init.rev
  }
  const cid = parseCid(root.cid)
  const bytes = await storage.getBytes(cid)
  if (!bytes) throw new Error(`commit block ${root.cid} of ${did} is missing`)
  const commit = ensureV3Commit(await storage.readObj(cid, def.versionedCommit))
  if (await verifyCommitSig(commit, keypair.did())) {
    await appendSyncEvent(trx, did, root.rev, cid, bytes)
    return root.rev
  }
  const unsigned = { did, version: 3, data: commit.data, rev: TID.nextStr(root.rev), prev: null }
  const signed = encode({ ...unsigned, sig: await keypair.sign(encode(unsigned)) })
  const signedCid = cidForDagCbor(signed)
  const newBlocks = new BlockMap()
  newBlocks.set(signedCid, signed)
  await storage.applyCommit({
    cid: signedCid,
    rev: unsigned.rev,
    since: root.rev,
    prev: cid,
    newBlocks,
    relevantBlocks: new BlockMap(),
    removedCids: new CidSet([cid]),
  })
  await appendSyncEvent(trx, did, unsigned.rev, signedCid, signed)
  return unsigned.rev
}
