// App passwords, email tokens and invite codes.
import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  // one salt per account for every app password: a login hashes a candidate once and compares
  // the result against each stored app-password hash
  await db.schema.alterTable('account').addColumn('app_password_salt', 'text').execute()
  await db.schema.alterTable('account').addColumn('invite_note', 'text').execute()

  await db.schema
    .createTable('app_password')
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('privileged', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('app_password_pk', ['did', 'name'])
    .execute()

  await db.schema
    .createTable('email_token')
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('purpose', 'text', (c) => c.notNull())
    .addColumn('token', 'text', (c) => c.notNull())
    .addColumn('new_email', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('email_token_pk', ['did', 'purpose'])
    .execute()
  // resetPassword looks a token up by purpose and token, without the DID
  await db.schema.createIndex('email_token_purpose_token_idx').on('email_token').columns(['purpose', 'token']).execute()

  await db.schema
    .createTable('invite_code')
    .addColumn('code', 'text', (c) => c.primaryKey())
    .addColumn('use_count', 'integer', (c) => c.notNull())
    // decremented by a conditional update inside createAccount's transaction
    .addColumn('remaining', 'integer', (c) => c.notNull())
    .addColumn('disabled', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('for_account', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('invite_code_for_account_idx').on('invite_code').column('for_account').execute()

  await db.schema
    .createTable('invite_code_use')
    .addColumn('code', 'text', (c) => c.notNull())
    .addColumn('used_by', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('invite_code_use_pk', ['code', 'used_by'])
    .execute()
  await db.schema.createIndex('invite_code_use_used_by_idx').on('invite_code_use').column('used_by').execute()
}
