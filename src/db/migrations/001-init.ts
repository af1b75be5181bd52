import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const bytes = dialect === 'sqlite' ? 'blob' : 'bytea'

  await db.schema
    .createTable('account')
    .addColumn('did', 'text', (c) => c.primaryKey())
    .addColumn('handle', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    .addColumn('email_confirmed_at', 'text')
    .addColumn('password_hash', 'text')
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('migration_state', 'text', (c) => c.notNull().defaultTo('none'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('status_changed_at', 'text')
    .addColumn('takedown_ref', 'text')
    .addColumn('invites_disabled', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
  // uniqueness is the database's job, so two racing createAccount calls cannot both win
  await db.schema.createIndex('account_handle_uq').on('account').column('handle').unique().execute()
  await db.schema.createIndex('account_email_uq').on('account').column('email').unique().execute()

  await db.schema
    .createTable('refresh_token')
    .addColumn('jti', 'text', (c) => c.primaryKey())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('app_password_name', 'text')
    .addColumn('kind', 'text', (c) => c.notNull().defaultTo('session'))
    .addColumn('dpop_jkt', 'text')
    .addColumn('scope', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('refresh_token_did_idx').on('refresh_token').column('did').execute()

  await db.schema
    .createTable('plc_operation')
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('cid', 'text', (c) => c.notNull())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('plc_operation_pk', ['did', 'seq'])
    .execute()

  await db.schema
    .createTable('signing_key')
    .addColumn('did', 'text', (c) => c.primaryKey())
    .addColumn('private_key_hex', 'text', (c) => c.notNull())
    .addColumn('public_key_multibase', 'text', (c) => c.notNull())
    .execute()

  let event = db.schema.createTable('event')
  event =
    dialect === 'sqlite'
      ? event.addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      : event.addColumn('seq', 'bigserial', (c) => c.primaryKey())
  await event
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('payload', bytes, (c) => c.notNull())
    .addColumn('sequenced_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('event_did_idx').on('event').column('did').execute()
  await db.schema.createIndex('event_time_idx').on('event').column('sequenced_at').execute()
}
