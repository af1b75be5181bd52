import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Account migration: signing keys reserved for DIDs that may move here, and the
// DID an account is moving to, which its 60-minute migration token names as `aud`.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('reserved_signing_key')
    .addColumn('did', 'text', (c) => c.primaryKey())
    .addColumn('private_key_hex', 'text', (c) => c.notNull())
    .addColumn('public_key_multibase', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.alterTable('account').addColumn('migration_destination', 'text').execute()
}
