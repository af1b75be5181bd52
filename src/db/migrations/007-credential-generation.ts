import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Ending sessions without a lookup per request: the account row, read on every authenticated
// request anyway, carries the generation its tokens must name (bumped when the password changes)
// and the app passwords revoked while access tokens minted under them could still be alive.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('account')
    .addColumn('credential_gen', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema.alterTable('account').addColumn('revoked_app_passwords', 'text').execute()
}
