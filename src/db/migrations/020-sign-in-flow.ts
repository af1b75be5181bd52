import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// One sign-in flow for the OAuth page and the account page. A device's sign-in of an account is
// bound to the account's credential generation (a password change or reset ends it wherever it
// is remembered) and says when a password was last given there, apart from when the device last
// signed in: a passkey alone signs in but never stands for the password. A held step (a sign-in
// waiting for its second factor, or for the password after a passkey) is bound to the generation
// too and says what it waits for. Each passkey records the generation it was last confirmed under
// with the password: the first passkey sign-in after a password change asks for the new one.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('device_account').addColumn('credential_gen', 'integer').execute()
  await db.schema.alterTable('device_account').addColumn('password_at', 'text').execute()
  // sign-ins recorded so far were password sign-ins under the generation the account has now
  await sql`update device_account set password_at = authenticated_at,
    credential_gen = (select credential_gen from account where account.did = device_account.did)`.execute(db)

  await db.schema
    .alterTable('sign_in_step')
    .addColumn('credential_gen', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema
    .alterTable('sign_in_step')
    .addColumn('awaits', 'text', (c) => c.notNull().defaultTo('factor'))
    .execute()
  await db.schema.alterTable('sign_in_step').addColumn('passkey_id', 'text').execute()
  // steps held before this migration were not bound: they are dropped (a password is asked again)
  await sql`delete from sign_in_step`.execute(db)

  await db.schema.alterTable('passkey').addColumn('confirmed_gen', 'integer').execute()
  await sql`update passkey set confirmed_gen = (select credential_gen from account where account.did = passkey.did)`.execute(db)
}
