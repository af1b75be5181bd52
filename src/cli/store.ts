// Where the operator CLI finds the server's store, and its refusal to make one: only the server's
// first start creates a store (with its secrets and PLC rotation key), so a CLI pointed at the
// wrong directory or database says so instead of quietly working on a new, empty one.
import { existsSync } from 'node:fs'
import type { Config } from '../config.js'
import { UsageError } from './args.js'

/** one line naming the store a command works on */
export function describeStore(db: Config['db'], dataDir: string): string {
  if (db.kind === 'sqlite') return `SQLite at ${db.file}`
  const u = new URL(db.url)
  return `PostgreSQL ${u.host}${u.pathname}, schema ${db.schema} (data directory ${dataDir})`
}

export async function storeExists(db: Config['db']): Promise<boolean> {
  if (db.kind === 'sqlite') return existsSync(db.file)
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: db.url })
  await client.connect()
  try {
    const r = await client.query(`select 1 from information_schema.tables where table_schema = $1 and table_name = 'kysely_migration'`, [
      db.schema,
    ])
    return r.rowCount !== null && r.rowCount > 0
  } finally {
    await client.end()
  }
}

export async function requireStore(db: Config['db'], dataDir: string, envFile: string | undefined): Promise<void> {
  if (await storeExists(db)) return
  const from = envFile ? `the environment file ${envFile}` : 'the environment (no environment file; --env-file names one)'
  throw new UsageError(
    `no store: ${describeStore(db, dataDir)} does not exist (settings from ${from}). ` +
      "Only the server creates a store, on its first start; point the CLI at the running server's environment with --env-file or PDS_DATA_DIRECTORY / PDS_DB_POSTGRES_URL",
  )
}
