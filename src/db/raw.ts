// The hot statements of a repository write, as SQL text compiled once per shape and run as-is:
// Kysely builds and compiles a query anew on every call, which costs more than these statements
// themselves. Text is written with `?` placeholders and numbered ($1, $2, ...) for PostgreSQL.
import { CompiledQuery, type QueryResult } from 'kysely'
import { numberPlaceholders, type Dialect } from './dialect.js'
import type { Store } from './schema.js'

// distinct texts: a handful of statements times the row counts they are used with
const MAX_TEXTS = 2000
const texts = new Map<string, string>()

function cached(key: string, make: () => string): string {
  let t = texts.get(key)
  if (t === undefined) {
    if (texts.size >= MAX_TEXTS) texts.clear()
    texts.set(key, (t = make()))
  }
  return t
}

/** runs `sql` (with `?` placeholders, none inside literals) on `db` */
export function exec<R = unknown>(db: Store, dialect: Dialect, sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
  const text = dialect === 'sqlite' ? sql : cached(`pg:${sql}`, () => numberPlaceholders(dialect, sql))
  // the caller's array itself, not a frozen copy: bulkInsert empties its chunks once they ran
  return db.executeQuery<R>({ ...CompiledQuery.raw(text), parameters: params })
}

/** `(?, ?), (?, ?)` for `rows` rows of `width` values */
export const valuesList = (rows: number, width: number) =>
  cached(`values:${rows}:${width}`, () => {
    const row = `(${Array(width).fill('?').join(', ')})`
    return Array(rows).fill(row).join(', ')
  })

/** `(?, ?, ?)` for an IN list of `n` */
export const inList = (n: number) => cached(`in:${n}`, () => `(${Array(n).fill('?').join(', ')})`)

/** rows changed by an INSERT, UPDATE or DELETE */
export const changed = (res: QueryResult<unknown>) => Number(res.numAffectedRows ?? 0)

/**
 * A long ordered read taken a page at a time (inside one snapshot): `select` is a query with a
 * WHERE clause and `?` placeholders, read in `key` order; each call of the returned function
 * gives the next page (fewer than `pageSize` rows: the end). PostgreSQL reads it through one
 * server-side cursor: keyset pages (`key > last ... limit`) were planned as a scan of every
 * remaining row and a sort while the table's statistics were stale. SQLite pages by key.
 */
export function orderedPages<R extends Record<string, unknown>>(
  db: Store,
  dialect: Dialect,
  q: { select: string; params: readonly unknown[]; key: keyof R & string; pageSize: number; cursorName: string },
): () => Promise<R[]> {
  if (dialect === 'postgres') {
    let declared = false
    return async () => {
      if (!declared) {
        await exec(db, dialect, `declare ${q.cursorName} no scroll cursor for ${q.select} order by ${q.key}`, q.params)
        declared = true
      }
      return (await exec<R>(db, dialect, `fetch ${q.pageSize} from ${q.cursorName}`, [])).rows
    }
  }
  let after = ''
  const text = `${q.select} and ${q.key} > ? order by ${q.key} limit ${q.pageSize}`
  return async () => {
    const { rows } = await exec<R>(db, dialect, text, [...q.params, after])
    if (rows.length) after = String(rows[rows.length - 1][q.key])
    return rows
  }
}
