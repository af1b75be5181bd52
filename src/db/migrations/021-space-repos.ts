// Permissioned repos (Spaces): what each local account wrote into each space, kept apart from the
// public repository so a change of the still-moving format is a migration of these tables alone.
import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const bytes = dialect === 'sqlite' ? 'blob' : 'bytea'

  // one row per (space, account) once its first write committed: the LtHash state and the rev
  // a commit is signed over at read time; the row writes of that repo lock
  await db.schema
    .createTable('space_repo')
    .addColumn('space', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('authority', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('rev', 'text', (c) => c.notNull())
    .addColumn('state', bytes, (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('space_repo_pk', ['space', 'did'])
    .execute()
  // listSpaces: an account's spaces in URI order
  await db.schema.createIndex('space_repo_did_idx').on('space_repo').columns(['did', 'space']).execute()

  await db.schema
    .createTable('space_record')
    .addColumn('space', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('collection', 'text', (c) => c.notNull())
    .addColumn('rkey', 'text', (c) => c.notNull())
    .addColumn('cid', 'text', (c) => c.notNull())
    .addColumn('rev', 'text', (c) => c.notNull())
    // the record's DAG-CBOR block, as getRepo sends it
    .addColumn('value', bytes, (c) => c.notNull())
    .addPrimaryKeyConstraint('space_record_pk', ['space', 'did', 'collection', 'rkey'])
    .execute()

  // the operation log: one row per op, `idx` its place in its write batch (rev)
  await db.schema
    .createTable('space_op')
    .addColumn('space', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('rev', 'text', (c) => c.notNull())
    .addColumn('idx', 'integer', (c) => c.notNull())
    .addColumn('collection', 'text', (c) => c.notNull())
    .addColumn('rkey', 'text', (c) => c.notNull())
    .addColumn('cid', 'text')
    .addColumn('prev', 'text')
    .addPrimaryKeyConstraint('space_op_pk', ['space', 'did', 'rev', 'idx'])
    .execute()

  // blobs a space record references: served only through that space, kept from the sweeper
  await db.schema
    .createTable('space_record_blob')
    .addColumn('space', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('collection', 'text', (c) => c.notNull())
    .addColumn('rkey', 'text', (c) => c.notNull())
    .addColumn('blob_cid', 'text', (c) => c.notNull())
    .addColumn('rev', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('space_record_blob_pk', ['space', 'did', 'collection', 'rkey', 'blob_cid'])
    .execute()
  await db.schema.createIndex('space_record_blob_cid_idx').on('space_record_blob').columns(['did', 'blob_cid']).execute()
  await db.schema.createIndex('space_record_blob_space_idx').on('space_record_blob').columns(['space', 'did', 'blob_cid']).execute()
}
