import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Record and blob takedowns: the reference of the moderation action on the row itself, so reads
// that already fetch the row hide a taken-down one without another query. Null: not taken down.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('record').addColumn('takedown_ref', 'text').execute()
  await db.schema.alterTable('blob').addColumn('takedown_ref', 'text').execute()
}
