// The OAuth page's second step. A correct password for an account with second factors is held
// here, server-side, bound to the browser's device session and to one pushed authorization
// request, until the factor is given; the client never carries it. A device's remembered sign-in
// records whether it included a second factor, so a returning user is asked again only when it
// did not.
import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('sign_in_step')
    .addColumn('device_id', 'text', (c) => c.notNull())
    .addColumn('request_uri', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('remember', 'integer', (c) => c.notNull())
    // wrong codes given at this step; enough of them end it
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    // the last time this step mailed a sign-in code ("send again" waits a little after it)
    .addColumn('mailed_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sign_in_step_pk', ['device_id', 'request_uri'])
    .execute()
  await db.schema.createIndex('sign_in_step_expires_idx').on('sign_in_step').column('expires_at').execute()
  // equal to authenticated_at when the device's latest sign-in of the account included a second factor
  await db.schema.alterTable('device_account').addColumn('factor_at', 'text').execute()
}
