// Second factors: email sign-in codes, an authenticator app (TOTP) with recovery codes, passkeys.
// Every code is stored as a keyed hash and the TOTP secret encrypted, so a copy of the database
// alone signs nobody in.
import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  // 1 while a password sign-in also needs a code mailed to the (confirmed) address
  await db.schema
    .alterTable('account')
    .addColumn('email_auth_factor', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()

  // one live code per account; `sends` in the window since `window_started_at` caps the mail
  await db.schema
    .createTable('sign_in_code')
    .addColumn('did', 'text', (c) => c.primaryKey())
    .addColumn('code_hash', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('sends', 'integer', (c) => c.notNull())
    .addColumn('window_started_at', 'text', (c) => c.notNull())
    .execute()

  // confirmed_at null: set up but not yet proven by a code from the app
  await db.schema
    .createTable('totp')
    .addColumn('did', 'text', (c) => c.primaryKey())
    .addColumn('secret_sealed', 'text', (c) => c.notNull())
    .addColumn('confirmed_at', 'text')
    // the newest time step accepted: a code of that step or an earlier one is a replay
    .addColumn('last_step', 'bigint')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()

  await db.schema
    .createTable('recovery_code')
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('code_hash', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('recovery_code_pk', ['did', 'code_hash'])
    .execute()

  await db.schema
    .createTable('passkey')
    .addColumn('credential_id', 'text', (c) => c.primaryKey())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    // the authenticator's signature counter is 32 bits unsigned: more than an integer holds
    .addColumn('counter', 'bigint', (c) => c.notNull())
    .addColumn('transports', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('backed_up', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .execute()
  await db.schema.createIndex('passkey_did_idx').on('passkey').column('did').execute()

  // WebAuthn challenges: single use (taken by a conditional delete), short-lived; did null for a
  // password-less sign-in, where the credential names the account
  await db.schema
    .createTable('webauthn_challenge')
    .addColumn('challenge', 'text', (c) => c.primaryKey())
    .addColumn('purpose', 'text', (c) => c.notNull())
    .addColumn('did', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute()
}
