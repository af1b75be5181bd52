import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Private app preferences (app.bsky.actor.putPreferences), one row per preference, kept in the
// order the client gave them.
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  let table = db.schema.createTable('account_pref')
  table =
    dialect === 'sqlite'
      ? table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      : table.addColumn('id', 'bigserial', (c) => c.primaryKey())
  await table
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('value_json', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('account_pref_did_idx').on('account_pref').column('did').execute()
}
