import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Expired passkey challenges are found through this index by a background sweep: without it each
// delete of the expired ones scanned the whole table, under SQLite's write lock.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.createIndex('webauthn_challenge_expires_idx').on('webauthn_challenge').column('expires_at').execute()
}
