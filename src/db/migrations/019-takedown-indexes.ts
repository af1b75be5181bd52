import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Takedowns are rare, so these partial indexes hold the taken-down rows alone: a firehose replay
// asks for the taken-down accounts once a page, and getBlocks for the repository's taken-down
// records, each in a lookup whose cost does not grow with the number of accounts or records.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.createIndex('account_takendown_idx').on('account').column('did').where(sql.ref('status'), '=', 'takendown').execute()
  await db.schema
    .createIndex('record_takedown_idx')
    .on('record')
    .columns(['did', 'cid'])
    .where(sql.ref('takedown_ref'), 'is not', null)
    .execute()
}
