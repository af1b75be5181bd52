import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// A record's value as the JSON text reads send, written with the record: getRecord and a
// listRecords page then read index rows only, at any repository size. Null for records written
// before this column existed; those are read from their blocks.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('record').addColumn('value_json', 'text').execute()
}
