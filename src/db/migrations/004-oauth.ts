import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// OAuth authorization server state: pushed authorization requests and
// one-time authorization codes; OAuth refresh records remember the client they were issued to and
// the access token minted with them.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('oauth_request')
    .addColumn('request_uri', 'text', (c) => c.primaryKey())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text', (c) => c.notNull())
    .addColumn('code_challenge_method', 'text', (c) => c.notNull())
    .addColumn('dpop_jkt', 'text', (c) => c.notNull())
    .addColumn('login_hint', 'text')
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('oauth_request_expires_idx').on('oauth_request').column('expires_at').execute()

  await db.schema
    .createTable('oauth_code')
    .addColumn('code', 'text', (c) => c.primaryKey())
    .addColumn('did', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text', (c) => c.notNull())
    .addColumn('dpop_jkt', 'text', (c) => c.notNull())
    .addColumn('used', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('oauth_code_expires_idx').on('oauth_code').column('expires_at').execute()

  await db.schema.alterTable('refresh_token').addColumn('client_id', 'text').execute()
  // the jti of the access token minted with the refresh token: the official client revokes with
  // its access token, and that must end the grant (RFC 7009 §2.1)
  await db.schema.alterTable('refresh_token').addColumn('access_jti', 'text').execute()
  await db.schema.createIndex('refresh_token_access_jti_idx').on('refresh_token').column('access_jti').execute()
}
