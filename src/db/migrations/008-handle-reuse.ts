import type { Kysely } from 'kysely'
import { sql } from 'kysely'
import type { Dialect } from '../dialect.js'

// A deleted account keeps its row (its DID stays taken) but gives its handle back: uniqueness now
// covers live accounts only.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.dropIndex('account_handle_uq').execute()
  await db.schema
    .createIndex('account_handle_uq')
    .on('account')
    .column('handle')
    .unique()
    .where(sql.ref('status'), '!=', 'deleted')
    .execute()
}
