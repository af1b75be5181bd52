// Every place a query must differ between SQLite and PostgreSQL, one named function each: code
// outside db/ never compares dialects itself.
import { type Kysely, PostgresAdapter, sql } from 'kysely'
import type { Schema, Store } from './schema.js'

export type Dialect = 'sqlite' | 'postgres'

/** the dialect behind a store or a transaction on it */
export function dialectOf(db: Store): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite'
}

/**
 * `query` holding its rows locked until commit: FOR UPDATE on PostgreSQL; SQLite runs one writer
 * at a time, so a plain read already is (and it has no FOR UPDATE)
 */
export function lockingRead<Q extends { forUpdate(): Q }>(dialect: Dialect, query: Q): Q {
  return dialect === 'postgres' ? query.forUpdate() : query
}

/**
 * PostgreSQL: takes transaction-scoped advisory lock `key` and queues a notification on
 * `channel` (delivered at commit), in one round trip. SQLite: nothing, its writers are
 * serialized already and there is no other process to wake.
 */
export async function advisoryLockAndNotify(db: Store, key: number, channel: string): Promise<void> {
  if (dialectOf(db) !== 'postgres') return
  await sql`select pg_advisory_xact_lock(${key}), pg_notify(${channel}, current_schema())`.execute(db)
}

/** a bytes column as hex text: many small blobs read as strings cost less than a Buffer each */
export const hexOf = (dialect: Dialect, column: string) => (dialect === 'sqlite' ? `hex(${column})` : `encode(${column}, 'hex')`)

/** `sql` with `?` placeholders as the dialect writes them: PostgreSQL numbers them ($1, $2, ...) */
export const numberPlaceholders = (dialect: Dialect, text: string) => {
  if (dialect === 'sqlite') return text
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/** PostgreSQL: takes a transaction-scoped advisory lock named by `name`; SQLite: nothing, its writers are serialized already */
export async function advisoryLockByName(db: Store, name: string): Promise<void> {
  if (dialectOf(db) !== 'postgres') return
  await sql`select pg_advisory_xact_lock(hashtextextended(${name}, 0))`.execute(db)
}

/**
 * PostgreSQL: `fn` run while this session holds the advisory lock named by `name` (per schema) on one
 * connection (no transaction stays open meanwhile), or undefined when another session holds it.
 * SQLite: `fn` run, as there is no other process sharing a schedule with this one.
 */
export async function tryExclusiveByName<T>(db: Kysely<Schema>, name: string, fn: () => Promise<T>): Promise<T | undefined> {
  if (dialectOf(db) !== 'postgres') return fn()
  return db.connection().execute(async (conn) => {
    const got = await sql<{
      ok: boolean
    }>`select pg_try_advisory_lock(hashtextextended(${name} || ':' || current_schema(), 0)) as ok`.execute(conn)
    if (!got.rows[0]?.ok) return undefined
    try {
      return await fn()
    } finally {
      await sql`select pg_advisory_unlock(hashtextextended(${name} || ':' || current_schema(), 0))`.execute(conn)
    }
  })
}

/**
 * Moves the event log's sequence so the next event's seq is above `floor`; never moves it back.
 * True when it moved. SQLite's AUTOINCREMENT takes the larger of sqlite_sequence and the largest
 * rowid; PostgreSQL's bigserial takes its sequence's next value.
 */
export async function raiseEventSeq(db: Store, floor: number): Promise<boolean> {
  if (dialectOf(db) === 'postgres') {
    const { rows } = await sql`
      select setval(pg_get_serial_sequence('event', 'seq'), ${floor}, true)
      where ${floor} > greatest(
        coalesce((select max(seq) from event), 0),
        coalesce(pg_sequence_last_value(pg_get_serial_sequence('event', 'seq')::regclass), 0))`.execute(db)
    return rows.length > 0
  }
  const { rows } = await sql<{
    seq: number
  }>`select max(coalesce((select seq from sqlite_sequence where name = 'event'), 0), coalesce((select max(seq) from event), 0)) as seq`.execute(
    db,
  )
  if (Number(rows[0]?.seq ?? 0) >= floor) return false
  const updated = await sql`update sqlite_sequence set seq = ${floor} where name = 'event'`.execute(db)
  if (!Number(updated.numAffectedRows ?? 0)) await sql`insert into sqlite_sequence (name, seq) values ('event', ${floor})`.execute(db)
  return true
}
