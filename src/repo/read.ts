// Reads shared by the repo.* and sync.* handlers: which account a `repo` parameter names, the
// status answers of the sync lexicons, and records with their values as JSON text.
import { sql, type Selectable } from 'kysely'
import type { AccountTable, Db } from '../db/index.js'
import { prepared } from '../db/prepared.js'
import { xrpcError } from '../errors.js'
import { cachedRecord, recordEnvelope, rememberRecord } from './record-cache.js'
import type { Store } from '../db/schema.js'

type AccountRow = Selectable<AccountTable>

const accountByDid = prepared((db: Store, did: string) =>
  db.selectFrom('account').selectAll().where('status', '!=', 'deleted').where('did', '=', did),
)
const accountByHandle = prepared((db: Store, handle: string) =>
  db.selectFrom('account').selectAll().where('status', '!=', 'deleted').where('handle', '=', handle),
)

/** the account a DID or handle names, deleted ones excluded */
export async function findRepoAccount(db: Store, repo: string): Promise<AccountRow | undefined> {
  const [row] = repo.startsWith('did:') ? await accountByDid(db, repo) : await accountByHandle(db, repo.toLowerCase())
  return row
}

/** repo.* reads: a missing, deleted or taken-down repository reads as not there (404) */
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
  return { account: gateSyncRead(account, opts), root }
}

/** the status answers of the sync reads for an account that exists */
export function gateSyncRead(account: AccountRow, opts: { allowDeactivated?: boolean } = {}): AccountRow {
  const did = account.did
  if (account.status === 'takendown') throw xrpcError('RepoTakendown', `Repo has been taken down: ${did}`)
  if (account.status === 'deactivated' && !opts.allowDeactivated) throw xrpcError('RepoDeactivated', `Repo has been deactivated: ${did}`)
  return account
}

/** the write handlers' check that `repo` is the caller's own */
export async function ownRepo(db: Db, repo: string, did: string) {
  const matches = repo.startsWith('did:') ? repo === did : (await findRepoAccount(db, repo))?.did === did
  if (!matches) throw xrpcError('AuthenticationRequired', "The repo is not the authenticated account's")
}

// a taken-down record reads as absent; the condition rides on the lookup every read makes anyway
const recordRow = prepared((db: Store, uri: string) =>
  db.selectFrom('record').select(['uri', 'cid', 'value_json']).where('uri', '=', uri).where('takedown_ref', 'is', null),
)

/** repo.getRecord: the record's CID and the record as JSON text; undefined when there is none or it is taken down */
export async function recordAsJson(db: Store, did: string, uri: string) {
  const [row] = await recordRow(db, uri)
  if (!row) return undefined
  const [json] = await asJson(db, did, [row])
  return json === undefined ? undefined : { cid: row.cid, json }
}

// listRecords pages by shape: direction, with or without a cursor, and the limit, which is part
// of the SQL text (SQLite re-prepares a statement whose LIMIT is a bound parameter on every run)
type PageRow = { uri: string; cid: string; value_json?: string | null }
const pageQueries = new Map<string, (db: Store, did: string, collection: string, cursor?: string) => Promise<PageRow[]>>()

function pageQuery(asc: boolean, withCursor: boolean, limit: number) {
  const key = `${asc} ${withCursor} ${limit}`
  let q = pageQueries.get(key)
  if (!q) {
    const page = (db: Store, did: string, collection: string) =>
      db
        .selectFrom('record')
        .select(['uri', 'cid', 'value_json'])
        .where('did', '=', did)
        .where('collection', '=', collection)
        .where('takedown_ref', 'is', null)
        .orderBy('rkey', asc ? 'asc' : 'desc')
        .limit(sql.lit(limit))
    const first = prepared(page)
    const after = prepared((db: Store, did: string, collection: string, cursor: string) =>
      page(db, did, collection).where('rkey', asc ? '>' : '<', cursor),
    )
    q = withCursor
      ? (db, did, collection, cursor) => after(db, did, collection, cursor!)
      : (db, did, collection) => first(db, did, collection)
    pageQueries.set(key, q)
  }
  return q
}

/** repo.listRecords: one page along the (did, collection, rkey) index, each record as JSON text, taken-down ones left out */
export async function recordPageAsJson(
  db: Store,
  did: string,
  collection: string,
  opts: { limit: number; cursor?: string; reverse: boolean },
) {
  if (!Number.isSafeInteger(opts.limit) || opts.limit < 1 || opts.limit > 100) throw xrpcError('InvalidRequest', 'limit must be 1 to 100')
  const rows = await pageQuery(opts.reverse, opts.cursor !== undefined, opts.limit)(db, did, collection, opts.cursor)
  // a full page has a cursor: the last rkey read, even when that record's block was gone
  const last = rows.length === opts.limit ? rows[rows.length - 1].uri : undefined
  const records = (await asJson(db, did, rows)).filter((j): j is string => j !== undefined)
  return { records, cursor: last?.slice(last.lastIndexOf('/') + 1) }
}

/**
 * each record as JSON text: from the value text its row keeps; a row from before that text was
 * kept from the cache, else from its block (undefined where the block is gone)
 */
async function asJson(db: Store, did: string, rows: PageRow[]): Promise<(string | undefined)[]> {
  const out: (string | undefined)[] = new Array(rows.length)
  let missing: Set<string> | undefined
  for (let i = 0; i < rows.length; i++) {
    const { uri, cid, value_json } = rows[i]
    if (value_json != null) {
      out[i] = recordEnvelope(uri, cid, value_json)
      continue
    }
    const json = cachedRecord(uri, cid)
    if (json === undefined) (missing ??= new Set()).add(rows[i].cid)
    out[i] = json
  }
  if (!missing) return out
  const blocks = await db
    .selectFrom('repo_block')
    .select(['cid', 'content'])
    .where('did', '=', did)
    .where('cid', 'in', [...missing])
    .execute()
  const content = new Map(blocks.map((b) => [b.cid, new Uint8Array(b.content)]))
  for (let i = 0; i < rows.length; i++) {
    const block = out[i] === undefined && rows[i].value_json == null ? content.get(rows[i].cid) : undefined
    if (block) out[i] = rememberRecord(rows[i].uri, rows[i].cid, block)
  }
  return out
}

/** counters of checkAccountStatus: maintained on write or answered from an index */
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

/** the repository's current commit and rev; undefined before it has one */
export async function repoHead(db: Store, did: string): Promise<{ cid: string; rev: string } | undefined> {
  return db.selectFrom('repo_root').select(['cid', 'rev']).where('did', '=', did).executeTakeFirst()
}

/** the collections the repository holds records in, in name order */
export async function repoCollections(db: Store, did: string): Promise<string[]> {
  const rows = await db.selectFrom('record').select('collection').distinct().where('did', '=', did).orderBy('collection').execute()
  return rows.map((r) => r.collection)
}

/** hosted repositories (deleted accounts' excluded) with their head and status, in DID order after `cursor` */
export async function listRepoHeads(db: Store, page: { limit: number; cursor?: string }) {
  let q = db
    .selectFrom('repo_root')
    .innerJoin('account', 'account.did', 'repo_root.did')
    .select(['repo_root.did', 'repo_root.cid', 'repo_root.rev', 'account.status'])
    .where('account.status', '!=', 'deleted')
    .orderBy('repo_root.did')
    .limit(page.limit)
  if (page.cursor) q = q.where('repo_root.did', '>', page.cursor)
  return q.execute()
}

export type RecentRecord = { uri: string; cid: string; rev: string; indexedAt: string; value: Record<string, unknown> }

/**
 * records of `collection` written after `sinceRev`, oldest first: only the `scan` newest record
 * keys are looked at (walking the (did, collection, rkey) index backwards), so the cost is bounded
 * whatever the repository's size; a record created under an old key is not found. Taken-down
 * records and records whose block is gone are left out.
 */
export async function recordsSince(db: Store, did: string, collection: string, sinceRev: string, scan: number): Promise<RecentRecord[]> {
  const rows = await db
    .selectFrom('record')
    .select(['uri', 'cid', 'rev', 'indexed_at', 'value_json'])
    .where('did', '=', did)
    .where('collection', '=', collection)
    .where('takedown_ref', 'is', null)
    .orderBy('rkey', 'desc')
    .limit(scan)
    .execute()
  const recent = rows.filter((r) => r.rev > sinceRev).sort((a, b) => (a.rev < b.rev ? -1 : a.rev > b.rev ? 1 : 0))
  return withValues(db, did, recent)
}

/** one record by collection and key when it was written after `sinceRev` */
export async function recordIfSince(
  db: Store,
  did: string,
  collection: string,
  rkey: string,
  sinceRev: string,
): Promise<RecentRecord | undefined> {
  const rows = await db
    .selectFrom('record')
    .select(['uri', 'cid', 'rev', 'indexed_at', 'value_json'])
    .where('did', '=', did)
    .where('collection', '=', collection)
    .where('rkey', '=', rkey)
    .where('takedown_ref', 'is', null)
    .where('rev', '>', sinceRev)
    .execute()
  return (await withValues(db, did, rows))[0]
}

/** whether the repository holds any record written at or before `rev` */
export async function hasRecordAtOrBefore(db: Store, did: string, rev: string): Promise<boolean> {
  const row = await db.selectFrom('record').select('uri').where('did', '=', did).where('rev', '<=', rev).limit(1).executeTakeFirst()
  return row !== undefined
}

async function withValues(db: Store, did: string, rows: (PageRow & { rev: string; indexed_at: string })[]): Promise<RecentRecord[]> {
  const json = await asJson(db, did, rows)
  const out: RecentRecord[] = []
  rows.forEach((r, i) => {
    if (json[i] === undefined) return
    out.push({ uri: r.uri, cid: r.cid, rev: r.rev, indexedAt: r.indexed_at, value: JSON.parse(json[i]).value })
  })
  return out
}
