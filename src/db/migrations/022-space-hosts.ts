import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// The space host's state for spaces whose authority is a local account: each space's policy (a
// tombstone once deleted, so credentials are refused as SpaceDeleted), its member list, the writer
// set learned from write notifications, and the syncers registered for notifications.
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const bytes = dialect === 'sqlite' ? 'blob' : 'bytea'

  await db.schema
    .createTable('space_config')
    .addColumn('space', 'text', (c) => c.primaryKey())
    .addColumn('authority', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    // the policy and app-access unions as JSON, with their $type
    .addColumn('policy', 'text', (c) => c.notNull())
    .addColumn('app_access', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    // set once deleted: the row stays as the tombstone
    .addColumn('deleted_at', 'text')
    .execute()
  await db.schema.createIndex('space_config_authority_idx').on('space_config').columns(['authority', 'space']).execute()

  await db.schema
    .createTable('space_member')
    .addColumn('space', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('space_member_pk', ['space', 'did'])
    .execute()

  await db.schema
    .createTable('space_writer')
    .addColumn('space', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('rev', 'text', (c) => c.notNull())
    .addColumn('hash', bytes, (c) => c.notNull())
    .addPrimaryKeyConstraint('space_writer_pk', ['space', 'did'])
    .execute()

  await db.schema
    .createTable('space_notify')
    .addColumn('space', 'text', (c) => c.notNull())
    .addColumn('service', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('space_notify_pk', ['space', 'service'])
    .execute()
}
