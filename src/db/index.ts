// Opens the store for the configured dialect and runs the numbered migrations at start.
//
// Where queries live and how they are written: handlers never query; the domain module that owns
// a table (account/, repo/, identity/, sequencer/, move/) exports a small named function
// per query. One style per purpose:
// - the Kysely builder for ordinary queries;
// - prepared() (db/prepared.ts) for the hot statements of a read or write, compiled once per
//   dialect (preparedIn() once per IN-list length);
// - bulkInsert() (db/bulk-insert.ts) for the multi-row inserts of a commit or an import, where
//   building the statement costs more than running it: the only raw SQL text (db/raw.ts), which
//   lint keeps inside db/.
// Whatever differs between SQLite and PostgreSQL is a named function in db/dialect.ts.
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { Kysely, PostgresDialect, sql } from 'kysely'
import { Migrator, type Migration } from 'kysely/migration'
import type pg from 'pg'
import type { Config } from '../config.js'
import { POSTGRES, STORE_RETRY } from '../limits.js'
import { openSqlite, type SqliteHooks } from './dialect-sqlite.js'
import { Db } from './store.js'
import type { Schema } from './schema.js'
import type { Dialect } from './dialect.js'
import { limitSnapshots, postgresSnapshot, sqliteSnapshots, type Snapshot } from './snapshot.js'
import * as m001 from './migrations/001-init.js'
import * as m002 from './migrations/002-accounts.js'
import * as m003 from './migrations/003-repos.js'
import * as m004 from './migrations/004-oauth.js'
import * as m005 from './migrations/005-preferences.js'
import * as m006 from './migrations/006-migration.js'
import * as m007 from './migrations/007-credential-generation.js'
import * as m008 from './migrations/008-handle-reuse.js'
import * as m009 from './migrations/009-moderation.js'
import * as m012 from './migrations/012-devices.js'
import * as m013 from './migrations/013-second-factors.js'
import * as m014 from './migrations/014-revoked-grants.js'
import * as m015 from './migrations/015-sign-in-steps.js'
import * as m016 from './migrations/016-record-json.js'
import * as m017 from './migrations/017-block-refs.js'
import * as m018 from './migrations/018-challenge-expiry.js'
import * as m019 from './migrations/019-takedown-indexes.js'
import * as m020 from './migrations/020-sign-in-flow.js'
import * as m021 from './migrations/021-space-repos.js'
import * as m022 from './migrations/022-space-hosts.js'

export { dialectOf, type Dialect } from './dialect.js'
export { Db, type Tx, type Writer } from './store.js'
// Store is imported from schema.ts itself: one module names it
export type {
  AccountStatus,
  MigrationState,
  AccountTable,
  RefreshTokenTable,
  PlcOperationTable,
  SigningKeyTable,
  EventTable,
  OAuthRequestTable,
  OAuthCodeTable,
  AppPasswordTable,
  EmailTokenPurpose,
  EmailTokenTable,
  InviteCodeTable,
  InviteCodeUseTable,
  RepoRootTable,
  RepoBlockTable,
  RecordTable,
  RecordBlobTable,
  BlobTable,
  ReservedSigningKeyTable,
  AccountPrefTable,
  Schema,
} from './schema.js'

const migrations: Record<string, { up: (db: Kysely<unknown>, d: Dialect) => Promise<void> }> = {
  '001-init': m001,
  '002-accounts': m002,
  '003-repos': m003,
  '004-oauth': m004,
  '005-preferences': m005,
  '006-migration': m006,
  '007-credential-generation': m007,
  '008-handle-reuse': m008,
  '009-moderation': m009,
  '012-devices': m012,
  '013-second-factors': m013,
  '014-revoked-grants': m014,
  '015-sign-in-steps': m015,
  '016-record-json': m016,
  '017-block-refs': m017,
  '018-challenge-expiry': m018,
  '019-takedown-indexes': m019,
  '020-sign-in-flow': m020,
  '021-space-repos': m021,
  '022-space-hosts': m022,
}

// The driver loads only for PostgreSQL: a server on SQLite never holds it in memory.
type PgDriver = typeof pg
let driver: Promise<PgDriver> | undefined
const loadPg = () =>
  (driver ??= import('pg').then(({ default: pg }) => {
    // PostgreSQL returns BIGINT (int8) as strings; our sequence numbers fit in a double.
    pg.types.setTypeParser(20, (v) => Number(v))
    return pg
  }))

/** `opts`: SQLite only, see SqliteHooks */
export async function openDb(cfg: Config['db'], opts: SqliteHooks = {}): Promise<Db> {
  let db: Kysely<Schema>
  let pgPool: pg.Pool | undefined
  // PostgreSQL's COMMIT returns once the commit is durable
  let durable = () => Promise.resolve()
  let snapshot = (): Promise<Snapshot> => postgresSnapshot(db)
  if (cfg.kind === 'sqlite') {
    // owner-only when this creates it (an existing directory is the operator's to set)
    mkdirSync(dirname(cfg.file), { recursive: true, mode: 0o700 })
    const sqlite = openSqlite(cfg.file, opts)
    durable = sqlite.durable
    const readers = sqliteSnapshots(cfg.file)
    snapshot = () => readers.take()
    db = new Kysely<Schema>({ dialect: sqlite.dialect })
    const destroy = db.destroy.bind(db)
    db.destroy = async () => {
      readers.close()
      await destroy()
    }
  } else {
    const pg = await loadPg()
    await ensureSchema(pg, cfg.url, cfg.schema)
    const pool = new pg.Pool({
      connectionString: cfg.url,
      max: POSTGRES.poolMax,
      options: `-c search_path=${cfg.schema}`,
    })
    // an idle client that loses its connection must not crash the process
    pool.on('error', () => {})
    // nor one checked out between two queries of a transaction (pg-pool only listens while a
    // client is idle): the loss surfaces on the next query, and the pool drops the client
    pool.on('connect', (client) => client.on('error', () => {}))
    pgPool = pool
    db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool }) })
  }
  const out = new Db({
    kysely: db,
    dialect: cfg.kind,
    pool: pgPool,
    durable,
    snapshot: limitSnapshots(snapshot, cfg.kind === 'sqlite' ? 8 : 4),
    // PostgreSQL: a transaction cut off before COMMIT rolled back in full, run it again on a fresh
    // connection. SQLite's one connection is a file handle that is never cut off.
    retryable: cfg.kind === 'postgres' ? isConnectionLost : () => false,
  })
  await migrate(out, cfg.kind === 'postgres' ? cfg.schema : undefined)
  return out
}

/**
 * true when `err` says the database connection went away (the server restarted, an operator ran
 * pg_terminate_backend, the network dropped), as opposed to an answer about the query
 */
export function isConnectionLost(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined
  const code = typeof e?.code === 'string' ? e.code : ''
  // 08xxx connection exceptions, 57P01-57P03 admin/crash shutdown and not accepting connections
  if (/^08/.test(code) || code === '57P01' || code === '57P02' || code === '57P03') return true
  if (code === 'ECONNRESET' || code === 'ECONNREFUSED' || code === 'EPIPE' || code === 'ETIMEDOUT') return true
  const msg = typeof e?.message === 'string' ? e.message : ''
  return /Connection terminated|not queryable|Client was closed/i.test(msg)
}

async function ensureSchema(pg: PgDriver, url: string, schema: string) {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`create schema if not exists "${schema}"`)
  } finally {
    await client.end()
  }
}

async function migrate(db: Db, schema?: string) {
  const provider = {
    async getMigrations() {
      const out: Record<string, Migration> = {}
      for (const [name, m] of Object.entries(migrations)) {
        out[name] = { up: (k) => m.up(k, db.dialect) }
      }
      return out
    },
  }
  // named explicitly: the migrator looks for its tables across all schemas otherwise, and finds
  // another server's
  // Kysely's PostgreSQL introspection reads every schema of the database; one dropped meanwhile
  // (another server sharing the database going away) fails the query with 3F000. Try again.
  for (let attempt = 1; ; attempt++) {
    const { error } = await new Migrator({ db: db.kysely, provider, migrationTableSchema: schema }).migrateToLatest()
    if (!error) return
    const e = error as { code?: string; message?: string }
    const otherSchemaGone = e.code === '3F000' && !!schema && !e.message?.includes(`"${schema}"`)
    if (!otherSchemaGone || attempt >= STORE_RETRY.migrateAttempts) throw error as Error
    await new Promise((r) => setTimeout(r, STORE_RETRY.migrateBackoffMs * attempt))
  }
}

/** resolves when the database answers a trivial query */
export async function ping(db: Db): Promise<void> {
  await sql`select 1`.execute(db)
}

/** true when `err` is a unique-constraint violation on either dialect */
export function isUniqueViolation(err: unknown, index?: string): boolean {
  const e = err as { code?: string; constraint?: string; message?: string }
  if (e?.code === '23505') return !index || e.constraint === index
  if (e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return !index || !!e.message?.includes(index) || indexColumnsMatch(e.message, index)
  }
  return false
}

// SQLite names the columns, not the index: "UNIQUE constraint failed: account.handle"
const indexColumns: Record<string, string> = {
  account_handle_uq: 'account.handle',
  account_email_uq: 'account.email',
}
function indexColumnsMatch(message: string | undefined, index: string) {
  const cols = indexColumns[index]
  return !!cols && !!message?.includes(cols)
}
