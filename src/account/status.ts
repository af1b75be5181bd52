// checkAccountStatus: did, handle, email, emailConfirmed, status, active and the official required
// ones, every count cheap (no expected-records / expected-blocks).
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import * as dagCbor from '@ipld/dag-cbor'
import { emailFields, type AccountRow } from './store.js'
import type { Store } from '../db/schema.js'
import { latestOp, pdsEndpoint, renderDidDoc } from '../identity/plc.js'
import { repoCounts } from '../repo/read.js'

export type RepoStatusCounts = {
  repoCommit: string
  repoRev: string
  repoBlocks: number
  indexedRecords: number
  privateStateValues: number
  expectedBlobs: number
  importedBlobs: number
}

// An account migrating in has no repository until its import: the lexicon still requires a
// CID, so the CID of an empty DAG-CBOR map stands in until then.
const EMPTY = dagCbor.encode({})
let emptyCid: Promise<string> | undefined
const emptyCommit = () => (emptyCid ??= Promise.resolve(sha256.digest(EMPTY)).then((h) => CID.createV1(dagCbor.code, h).toString()))

/** the repository part of checkAccountStatus: counters kept on write, and index counts */
export async function repoStatusCounts(db: Store, did: string): Promise<RepoStatusCounts> {
  const c = await repoCounts(db, did)
  return {
    repoCommit: c.repoCommit ?? (await emptyCommit()),
    repoRev: c.repoRev ?? '',
    repoBlocks: c.repoBlocks,
    indexedRecords: c.indexedRecords,
    privateStateValues: 0,
    expectedBlobs: c.expectedBlobs,
    importedBlobs: c.importedBlobs,
  }
}

export async function accountStatus(db: Store, account: AccountRow, publicUrl: string, showEmail = true) {
  const latest = await latestOp(db, account.did)
  // the DID is valid for this server when its document names this server as the PDS
  const validDid = !!latest && pdsEndpoint(renderDidDoc(account.did, latest.op)) === publicUrl
  return {
    did: account.did,
    handle: account.handle,
    ...emailFields(account, showEmail),
    status: account.status,
    active: account.status === 'active',
    activated: account.status === 'active',
    validDid,
    ...(await repoStatusCounts(db, account.did)),
  }
}
