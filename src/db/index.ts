// The only module that knows SQLite from PostgreSQL: opens the store for the configured dialect
// and runs the numbered migrations at start.
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { Kysely, PostgresAdapter, PostgresDialect, SqliteDialect } from 'kysely'
import { Migrator, type Migration } from 'kysely/migration'
import pg from 'pg'
import type { Config } from '../config.js'
import type { Schema } from './schema.js'
import * as m001 from './migrations/001-init.js'

export type Dialect = 'sqlite' | 'postgres'
export type Db = Kysely<Schema> & { dialect: Dialect }
export type * from './schema.js'

const migrations: Record<string, { up: (db: Kysely<unknown>, d: Dialect) => Promise<void> }> = {
  '001-init': m001,
}

// PostgreSQL returns BIGINT (int8) as strings; our sequence numbers fit in a double.
pg.types.setTypeParser(20, (v) => Number(v))

export async function openDb(cfg: Config['db']): Promise<Db> {
  let db: Kysely<Schema>
  if (cfg.kind === 'sqlite') {
    mkdirSync(dirname(cfg.file), { recursive: true })
    const sqlite = new SqliteDatabase(cfg.file)
    sqlite.pragma('journal_mode = WAL')
    // FULL: an acknowledged write survives a power loss, not only a process crash
    sqlite.pragma('synchronous = FULL')
    sqlite.pragma('foreign_keys = ON')
    sqlite.pragma('busy_timeout = 5000')
    db = new Kysely<Schema>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) })
  } else {
    await ensureSchema(cfg.url, cfg.schema)
    const pool = new pg.Pool({
      connectionString: cfg.url,
      max: 10,
      options: `-c search_path=${cfg.schema}`,
    })
    // an idle client that loses its connection must not crash the process
    pool.on('error', () => {})
    db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool }) })
  }
  const out = Object.assign(db, { dialect: (cfg.kind === 'sqlite' ? 'sqlite' : 'postgres') as Dialect })
  await migrate(out, cfg.kind === 'postgres' ? cfg.schema : undefined)
  return out
}

/**
 * Kysely prepares every query anew; better-sqlite3 statements are reusable, so keep the prepared
 * statement per SQL text (bounded, oldest out). A statement still iterating (a streamed query)
 * is busy: then a fresh one is prepared. SQLite re-prepares cached statements by itself after a
 * schema change.
 */
const STATEMENT_CACHE_SIZE = 500
function withStatementCache(sqlite: SqliteDatabase.Database) {
  const cache = new Map<string, SqliteDatabase.Statement>()
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      const hit = cache.get(sql)
      if (hit && !hit.busy) return hit
      const stmt = sqlite.prepare(sql)
      if (!hit) {
        if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string)
        cache.set(sql, stmt)
      }
      return stmt
    },
  }
}

async function ensureSchema(url: string, schema: string) {
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
  const { error } = await new Migrator({ db, provider, migrationTableSchema: schema }).migrateToLatest()
  if (error) throw error
}

/** the dialect behind a store or a transaction on it */
export function dialectOf(db: Kysely<Schema>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite'
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
