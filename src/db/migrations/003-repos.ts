// Repositories and blobs: the block store, the repository head, the record index, record→blob
// references and blob metadata. Independent of every other migration but 001.
import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const bytes = dialect === 'sqlite' ? 'blob' : 'bytea'

  // one row per repository; the row the per-repository write lock is taken on
  await db.schema
    .createTable('repo_root')
    .addColumn('did', 'text', (c) => c.primaryKey())
    .addColumn('cid', 'text', (c) => c.notNull())
    .addColumn('rev', 'text', (c) => c.notNull())
    .addColumn('indexed_at', 'text', (c) => c.notNull())
    // counters checkAccountStatus reads, maintained by every write
    .addColumn('block_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('record_count', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()

  await db.schema
    .createTable('repo_block')
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('cid', 'text', (c) => c.notNull())
    .addColumn('repo_rev', 'text', (c) => c.notNull())
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('content', bytes, (c) => c.notNull())
    .addPrimaryKeyConstraint('repo_block_pk', ['did', 'cid'])
    .execute()
  // getRepo `since`: the blocks written after a revision
  await db.schema.createIndex('repo_block_rev_idx').on('repo_block').columns(['did', 'repo_rev']).execute()

  await db.schema
    .createTable('record')
    .addColumn('uri', 'text', (c) => c.primaryKey())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('collection', 'text', (c) => c.notNull())
    .addColumn('rkey', 'text', (c) => c.notNull())
    .addColumn('cid', 'text', (c) => c.notNull())
    .addColumn('rev', 'text', (c) => c.notNull())
    .addColumn('indexed_at', 'text', (c) => c.notNull())
    .execute()
  // listRecords walks this index from the cursor: the same cost at any repository size
  await db.schema.createIndex('record_collection_rkey_uq').on('record').columns(['did', 'collection', 'rkey']).unique().execute()
  await db.schema.createIndex('record_cid_idx').on('record').columns(['did', 'cid']).execute()

  await db.schema
    .createTable('record_blob')
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('blob_cid', 'text', (c) => c.notNull())
    .addColumn('record_uri', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('record_blob_pk', ['did', 'blob_cid', 'record_uri'])
    .execute()
  await db.schema.createIndex('record_blob_uri_idx').on('record_blob').column('record_uri').execute()

  // blob metadata per account; the bytes live in the blob store, keyed by CID
  await db.schema
    .createTable('blob')
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('cid', 'text', (c) => c.notNull())
    .addColumn('mime_type', 'text', (c) => c.notNull())
    .addColumn('size', 'integer', (c) => c.notNull())
    // 0 until a record references it; unreferenced uploads are collected after a grace period
    .addColumn('referenced', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('blob_pk', ['did', 'cid'])
    .execute()
  await db.schema.createIndex('blob_unreferenced_idx').on('blob').columns(['referenced', 'created_at']).execute()
  await db.schema.createIndex('blob_cid_idx').on('blob').column('cid').execute()
}
