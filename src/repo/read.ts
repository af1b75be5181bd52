// Reads shared by the repo.* and sync.* handlers: which account a `repo` parameter names, the
// status answers of the sync lexicons, and record values as JSON.
import { decode as decodeCbor, type TagDecoder } from 'cborg'
import { CID } from 'multiformats/cid'
import type { AccountRow } from '../account/store.js'
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'
import type { Store } from './storage.js'

/** the account a DID or handle names, deleted ones excluded */
export async function findRepoAccount(db: Store, repo: string): Promise<AccountRow | undefined> {
  const q = db.selectFrom('account').selectAll().where('status', '!=', 'deleted')
  return repo.startsWith('did:')
    ? q.where('did', '=', repo).executeTakeFirst()
    : q.where('handle', '=', repo.toLowerCase()).executeTakeFirst()
}

/** repo.* reads: a missing, deleted or taken-down repository reads as not there (CONTRACT: 404) */
export async function readableRepo(db: Store, repo: string): Promise<AccountRow> {
  const account = await findRepoAccount(db, repo)
  if (!account || account.status === 'takendown') throw xrpcError('RepoNotFound', `Could not find repo: ${repo}`)
  return account
}

/** sync.* reads: RepoNotFound / RepoTakendown / RepoDeactivated as the sync lexicons name them */
export async function syncRepo(db: Store, did: string, opts: { allowDeactivated?: boolean } = {}) {
  const account = await findRepoAccount(db, did)
  const root = account && (await db.selectFrom('repo_root').selectAll().where('did', '=', did).executeTakeFirst())
  if (!account || !root) throw xrpcError('RepoNotFound', `Could not find repo for DID: ${did}`)
  if (account.status === 'takendown') throw xrpcError('RepoTakendown', `Repo has been taken down: ${did}`)
  if (account.status === 'deactivated' && !opts.allowDeactivated) throw xrpcError('RepoDeactivated', `Repo has been deactivated: ${did}`)
  return { account, root }
}

/** the write handlers' check that `repo` is the caller's own */
export async function ownRepo(db: Db, repo: string, did: string) {
  const matches = repo.startsWith('did:') ? repo === did : (await findRepoAccount(db, repo))?.did === did
  if (!matches) throw xrpcError('AuthenticationRequired', 'The repo is not the authenticated account\'s')
}

// DAG-CBOR tag 42 is a CID (after a 0x00 prefix); a record value carries it as {$link}
const recordTags: TagDecoder[] = []
recordTags[42] = (bytes: Uint8Array) => ({ $link: CID.decode(bytes.subarray(1)).toString() })

/**
 * A stored record block as the value repo.getRecord / listRecords return: one decoding pass
 * straight to the JSON data model's shapes (a CID as {$link}); byte strings stay bytes, which the
 * response writer encodes as {$bytes}. Blocks are ours, written by the DAG-CBOR encoder.
 */
export function recordJson(bytes: Uint8Array): { [k: string]: unknown } {
  return decodeCbor(bytes, { tags: recordTags }) as { [k: string]: unknown }
}

/** counters of checkAccountStatus (DECISIONS.md 6): maintained on write or answered from an index */
export async function repoCounts(db: Store, did: string) {
  const root = await db.selectFrom('repo_root').selectAll().where('did', '=', did).executeTakeFirst()
  const expected = await db
    .selectFrom('record_blob')
    .select((eb) => eb.fn.count<number>('blob_cid').distinct().as('n'))
    .where('did', '=', did)
    .executeTakeFirst()
  const imported = await db
    .selectFrom('blob')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('did', '=', did)
    .executeTakeFirst()
  return {
    repoCommit: root?.cid,
    repoRev: root?.rev,
    repoBlocks: root?.block_count ?? 0,
    indexedRecords: root?.record_count ?? 0,
    expectedBlobs: Number(expected?.n ?? 0),
    importedBlobs: Number(imported?.n ?? 0),
  }
}
