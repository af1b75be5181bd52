// @atproto/repo's storage interface over the Kysely store, bound to one repository and one
// transaction: reads see the transaction's own writes, and nothing lands unless it commits.
import { BlockMap, ReadableBlockstore, type CommitData, type RepoStorage } from '@atproto/repo'
import { parseCid, type Cid } from '@atproto/lex-data'
import { dialectOf, type Dialect } from '../db/index.js'
import { bulkInsert } from '../db/bulk-insert.js'
import { prepared, preparedChange, preparedInChange } from '../db/prepared.js'
import { blockEntries, cidStrings } from '../patches/repo.js'
import type { Store } from '../db/schema.js'

// CIDs per IN list: well under SQLite's and PostgreSQL's bind limits
const CHUNK = 500

const BLOCK_COLUMNS = ['did', 'cid', 'repo_rev', 'size', 'content', 'refs'] as const

const selectBlock = prepared((db, did: string, cid: string) =>
  db.selectFrom('repo_block').select('content').where('did', '=', did).where('cid', '=', cid),
)
const deleteBlocks = preparedInChange((db, cids: string[], did: string) =>
  db.deleteFrom('repo_block').where('did', '=', did).where('cid', 'in', cids),
)
// a value's block whose last record went
const deleteReleased = preparedInChange((db, cids: string[], did: string, count: number) =>
  db.deleteFrom('repo_block').where('did', '=', did).where('refs', '<=', count).where('cid', 'in', cids),
)
const releaseRefs = preparedInChange((db, cids: string[], did: string, count: number) =>
  db
    .updateTable('repo_block')
    .set((eb) => ({ refs: eb('refs', '-', count) }))
    .where('did', '=', did)
    .where('cid', 'in', cids),
)
// written by an earlier commit (`rev` is this one's): its rows from this commit already count
const addRefs = preparedChange((db, did: string, cid: string, delta: number, rev: string) =>
  db
    .updateTable('repo_block')
    .set((eb) => ({ refs: eb('refs', '+', delta) }))
    .where('did', '=', did)
    .where('cid', '=', cid)
    .where('repo_rev', '<>', rev),
)
const upsertRoot = preparedChange((db, did: string, cid: string, rev: string, at: string) =>
  db
    .insertInto('repo_root')
    .values({ did, cid, rev, indexed_at: at, block_count: 0, record_count: 0 })
    .onConflict((oc) =>
      oc.column('did').doUpdateSet((eb) => ({
        cid: eb.ref('excluded.cid'),
        rev: eb.ref('excluded.rev'),
        indexed_at: eb.ref('excluded.indexed_at'),
      })),
    ),
)
const countBlocks = preparedChange((db, did: string, delta: number) =>
  db
    .updateTable('repo_root')
    .set((eb) => ({ block_count: eb('block_count', '+', delta) }))
    .where('did', '=', did),
)

/** a commit's change to record values: CID -> records gained (+) or lost (-), and the value's bytes */
export type RecordRefs = Map<string, { delta: number; bytes?: Uint8Array }>

export class SqlRepoStorage extends ReadableBlockstore implements RepoStorage {
  private cache = new Map<string, Uint8Array>()
  private dialect: Dialect
  /** blocks read from the store so far (tree-cache.ts bounds a cached tree by it) */
  reads = 0

  constructor(
    private db: Store,
    readonly did: string,
  ) {
    super()
    this.dialect = dialectOf(db)
  }

  /** forgets the blocks seen so far (they stay in the store) */
  dropCache() {
    this.cache = new Map()
  }

  /** reads and writes go to `db` from now on (a cached tree's next writing transaction) */
  rebind(db: Store): this {
    this.db = db
    this.cache = new Map()
    return this
  }

  async getRoot(): Promise<Cid | null> {
    const row = await this.db.selectFrom('repo_root').select('cid').where('did', '=', this.did).executeTakeFirst()
    return row ? parseCid(row.cid) : null
  }

  async getBytes(cid: Cid): Promise<Uint8Array | null> {
    const key = cid.toString()
    const cached = this.cache.get(key)
    if (cached) return cached
    const [row] = await selectBlock(this.db, this.did, key)
    if (!row) return null
    this.reads++
    const bytes = new Uint8Array(row.content)
    this.cache.set(key, bytes)
    return bytes
  }

  async has(cid: Cid): Promise<boolean> {
    return (await this.getBytes(cid)) !== null
  }

  async getBlocks(cids: Cid[]): Promise<{ blocks: BlockMap; missing: Cid[] }> {
    const blocks = new BlockMap()
    const wanted: Cid[] = []
    for (const cid of cids) {
      const got = this.cache.get(cid.toString())
      if (got) blocks.set(cid, got)
      else wanted.push(cid)
    }
    for (let i = 0; i < wanted.length; i += CHUNK) {
      const part = wanted.slice(i, i + CHUNK).map((c) => c.toString())
      const rows = await this.db
        .selectFrom('repo_block')
        .select(['cid', 'content'])
        .where('did', '=', this.did)
        .where('cid', 'in', part)
        .execute()
      for (const r of rows) {
        const bytes = new Uint8Array(r.content)
        blocks.set(parseCid(r.cid), bytes)
        this.cache.set(r.cid, bytes)
      }
    }
    const missing = cids.filter((c) => !blocks.has(c))
    return { blocks, missing }
  }

  async putBlock(cid: Cid, block: Uint8Array, rev: string): Promise<void> {
    const map = new BlockMap()
    map.set(cid, block)
    await this.putMany(map, rev)
  }

  async putMany(blocks: BlockMap, rev: string): Promise<void> {
    await this.insertMany(blocks, rev)
  }

  /** inserts blocks not yet stored; returns how many were new */
  async insertMany(blocks: BlockMap, rev: string): Promise<number> {
    return this.insertRows(
      [...blockEntries(blocks)].map(([cid, bytes]) => [cid, bytes, 1]),
      rev,
    )
  }

  /** inserts [cid, bytes, refs] rows not yet stored; returns how many were new */
  private async insertRows(rows: [string, Uint8Array, number][], rev: string): Promise<number> {
    if (!rows.length) return 0
    const values: unknown[] = []
    for (const [cid, bytes, refs] of rows) {
      values.push(this.did, cid, rev, bytes.length, bytes, refs)
      this.cache.set(cid, bytes)
    }
    return bulkInsert(this.db, this.dialect, 'repo_block', BLOCK_COLUMNS, values, { skipConflictOn: ['did', 'cid'] })
  }

  /** deletes blocks; returns how many were stored */
  async deleteMany(cids: Cid[] | string[]): Promise<number> {
    let removed = 0
    for (let i = 0; i < cids.length; i += CHUNK) {
      const part = cids.slice(i, i + CHUNK).map((c) => c.toString())
      for (const c of part) this.cache.delete(c)
      removed += await deleteBlocks(this.db, part, this.did)
    }
    return removed
  }

  async updateRoot(cid: Cid, rev: string): Promise<void> {
    await upsertRoot(this.db, this.did, cid.toString(), rev, new Date().toISOString())
  }

  /**
   * stores a commit's blocks and removes the ones it replaced. Record values are counted apart
   * (`records`, from the commit's ops): a value's block is written with its first record and
   * removed with its last; every other block is a tree node or a commit, written or removed as is.
   */
  async applyCommit(commit: CommitData, records: RecordRefs = new Map()): Promise<void> {
    const rows: [string, Uint8Array, number][] = []
    for (const [cid, bytes] of blockEntries(commit.newBlocks)) if (!records.has(cid)) rows.push([cid, bytes, 1])
    const lost = new Map<number, string[]>()
    for (const [cid, { delta, bytes }] of records) {
      if (delta > 0) rows.push([cid, bytes!, delta])
      else if (delta < 0) {
        const cids = lost.get(delta)
        if (cids) cids.push(cid)
        else lost.set(delta, [cid])
      }
    }
    const added = await this.insertRows(rows, commit.rev)
    // a value already stored (another record has it, written by an earlier commit): one more reference
    if (added < rows.length) {
      for (const [cid, { delta }] of records) {
        if (delta <= 0) continue
        await addRefs(this.db, this.did, cid, delta, commit.rev)
      }
    }
    let removed = await this.deleteMany(cidStrings(commit.removedCids).filter((c) => !records.has(c)))
    for (const [delta, cids] of lost) removed += await this.release(cids, -delta)
    await this.updateRoot(commit.cid, commit.rev)
    await countBlocks(this.db, this.did, added - removed)
  }

  /** `count` fewer records have each of these values: a block whose last record went is deleted */
  private async release(cids: string[], count: number): Promise<number> {
    let removed = 0
    for (let i = 0; i < cids.length; i += CHUNK) {
      const part = cids.slice(i, i + CHUNK)
      for (const c of part) this.cache.delete(c)
      removed += await deleteReleased(this.db, part, this.did, count)
      // the shared ones: still there
      await releaseRefs(this.db, part, this.did, count)
    }
    return removed
  }
}
