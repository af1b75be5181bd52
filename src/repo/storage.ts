// @atproto/repo's storage interface over the Kysely store, bound to one repository and one
// transaction: reads see the transaction's own writes, and nothing lands unless it commits.
import { BlockMap, ReadableBlockstore, type CommitData, type RepoStorage } from '@atproto/repo'
import { parseCid, type Cid } from '@atproto/lex-data'
import { sql, type Kysely, type Transaction } from 'kysely'
import type { Schema } from '../db/index.js'

export type Store = Kysely<Schema> | Transaction<Schema>

// rows per INSERT: five parameters each, well under SQLite's and PostgreSQL's bind limits
const CHUNK = 500

export class SqlRepoStorage extends ReadableBlockstore implements RepoStorage {
  private cache = new BlockMap()

  constructor(
    private db: Store,
    readonly did: string,
  ) {
    super()
  }

  async getRoot(): Promise<Cid | null> {
    const row = await this.db.selectFrom('repo_root').select('cid').where('did', '=', this.did).executeTakeFirst()
    return row ? parseCid(row.cid) : null
  }

  async getBytes(cid: Cid): Promise<Uint8Array | null> {
    const cached = this.cache.get(cid)
    if (cached) return cached
    const row = await this.db
      .selectFrom('repo_block')
      .select('content')
      .where('did', '=', this.did)
      .where('cid', '=', cid.toString())
      .executeTakeFirst()
    if (!row) return null
    const bytes = new Uint8Array(row.content)
    this.cache.set(cid, bytes)
    return bytes
  }

  async has(cid: Cid): Promise<boolean> {
    return (await this.getBytes(cid)) !== null
  }

  async getBlocks(cids: Cid[]): Promise<{ blocks: BlockMap; missing: Cid[] }> {
    const blocks = new BlockMap()
    const wanted: Cid[] = []
    for (const cid of cids) {
      const got = this.cache.get(cid)
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
        this.cache.set(parseCid(r.cid), bytes)
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
    const rows: Schema['repo_block'][] = []
    blocks.forEach((bytes, cid) => {
      rows.push({ did: this.did, cid: cid.toString(), repo_rev: rev, size: bytes.length, content: bytes })
      this.cache.set(cid, bytes)
    })
    let added = 0
    for (let i = 0; i < rows.length; i += CHUNK) {
      const res = await this.db
        .insertInto('repo_block')
        .values(rows.slice(i, i + CHUNK))
        .onConflict((oc) => oc.columns(['did', 'cid']).doNothing())
        .executeTakeFirst()
      added += Number(res.numInsertedOrUpdatedRows ?? 0)
    }
    return added
  }

  /** deletes blocks; returns how many were stored */
  async deleteMany(cids: Cid[]): Promise<number> {
    let removed = 0
    for (let i = 0; i < cids.length; i += CHUNK) {
      const part = cids.slice(i, i + CHUNK)
      for (const c of part) this.cache.delete(c)
      const res = await this.db
        .deleteFrom('repo_block')
        .where('did', '=', this.did)
        .where(
          'cid',
          'in',
          part.map((c) => c.toString()),
        )
        .executeTakeFirst()
      removed += Number(res.numDeletedRows ?? 0)
    }
    return removed
  }

  async updateRoot(cid: Cid, rev: string): Promise<void> {
    const now = new Date().toISOString()
    await this.db
      .insertInto('repo_root')
      .values({ did: this.did, cid: cid.toString(), rev, indexed_at: now, block_count: 0, record_count: 0 })
      .onConflict((oc) => oc.column('did').doUpdateSet({ cid: cid.toString(), rev, indexed_at: now }))
      .execute()
  }

  async applyCommit(commit: CommitData): Promise<void> {
    const added = await this.insertMany(commit.newBlocks, commit.rev)
    const removed = await this.deleteMany(commit.removedCids.toList())
    await this.updateRoot(commit.cid, commit.rev)
    await this.db
      .updateTable('repo_root')
      .set({ block_count: sql`block_count + ${added - removed}` })
      .where('did', '=', this.did)
      .execute()
  }
}
