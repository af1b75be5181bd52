// checkAccountStatus (part 1 §4.5, DECISIONS.md 6): the spec's fields and the official required
// ones, every count cheap (no expected-records / expected-blocks).
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import * as dagCbor from '@ipld/dag-cbor'
import type { Store, AccountRow } from './store.js'
import { latestOp, pdsEndpoint, renderDidDoc } from '../identity/plc.js'

export type RepoStatusCounts = {
  repoCommit: string
  repoRev: string
  repoBlocks: number
  indexedRecords: number
  privateStateValues: number
  expectedBlobs: number
  importedBlobs: number
}

// Until this server keeps repositories there is no commit: the lexicon requires a CID, so the
// CID of an empty DAG-CBOR map stands in, and every count is zero.
const EMPTY = dagCbor.encode({})
let emptyCid: Promise<string> | undefined
const emptyCommit = () => (emptyCid ??= Promise.resolve(sha256.digest(EMPTY)).then((h) => CID.createV1(dagCbor.code, h).toString()))

/** the repository part of checkAccountStatus; one place to rewire when repositories exist */
export async function repoStatusCounts(_db: Store, _did: string): Promise<RepoStatusCounts> {
  return {
    repoCommit: await emptyCommit(),
    repoRev: '',
    repoBlocks: 0,
    indexedRecords: 0,
    privateStateValues: 0,
    expectedBlobs: 0,
    importedBlobs: 0,
  }
}

export async function accountStatus(db: Store, account: AccountRow, publicUrl: string) {
  const latest = await latestOp(db, account.did)
  // the DID is valid for this server when its document names this server as the PDS
  const validDid = !!latest && pdsEndpoint(renderDidDoc(account.did, latest.op)) === publicUrl
  return {
    did: account.did,
    handle: account.handle,
    ...(account.email ? { email: account.email } : {}),
    emailConfirmed: !!account.email_confirmed_at,
    status: account.status,
    active: account.status === 'active',
    activated: account.status === 'active',
    validDid,
    ...(await repoStatusCounts(db, account.did)),
  }
}
