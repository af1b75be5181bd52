import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Device sessions of the server's web pages: a browser's device (only a hash of its cookie's
// secret is kept) and the accounts that signed in on it, with when and whether to remember them.
// A pushed authorization request keeps the client's `prompt`.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('device')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('secret_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_seen_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('device_last_seen_idx').on('device').column('last_seen_at').execute()
  await db.schema
    .createTable('device_account')
    .addColumn('device_id', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('remember', 'integer', (c) => c.notNull())
    .addColumn('authenticated_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('device_account_pk', ['device_id', 'did'])
    .execute()
  await db.schema.createIndex('device_account_did_idx').on('device_account').column('did').execute()
  await db.schema.alterTable('oauth_request').addColumn('prompt', 'text').execute()
}
