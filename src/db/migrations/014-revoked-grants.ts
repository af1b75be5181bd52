import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// OAuth grants a person ended from the account page: access tokens are not stored, so the account
// row lists the DPoP keys of the ended grants for as long as an access token of theirs could live.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('account').addColumn('revoked_grants', 'text').execute()
}
