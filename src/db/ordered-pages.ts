import type { SelectQueryBuilder } from 'kysely'
import { dialectOf } from './dialect.js'
import { exec } from './raw.js'
import type { Schema, Store } from './schema.js'

/**
 * A long ordered read taken a page at a time (inside one snapshot): `select` is a query read in
 * `key` order; each call of the returned function gives the next page (fewer than `pageSize`
 * rows: the end). PostgreSQL reads it through one server-side cursor: keyset pages
 * (`key > last ... limit`) were planned as a scan of every remaining row and a sort while the
 * table's statistics were stale. SQLite pages by key.
 */
export function orderedPages<R extends Record<string, unknown>>(
  db: Store,
  q: { select: SelectQueryBuilder<Schema, any, R>; key: keyof R & string; pageSize: number; cursorName: string },
): () => Promise<R[]> {
  const dialect = dialectOf(db)
  // a column of the query's table, named as a string
  const key = q.key as any
  if (dialect === 'postgres') {
    let declared = false
    return async () => {
      if (!declared) {
        const { sql: text, parameters } = q.select.orderBy(key).compile()
        await exec(db, dialect, `declare ${q.cursorName} no scroll cursor for ${text}`, parameters)
        declared = true
      }
      return (await exec<R>(db, dialect, `fetch ${q.pageSize} from ${q.cursorName}`, [])).rows
    }
  }
  let after: unknown
  return async () => {
    const page = after === undefined ? q.select : q.select.where(key, '>', after)
    const { rows } = await db.executeQuery(page.orderBy(key).limit(q.pageSize).compile())
    if (rows.length) after = rows[rows.length - 1][q.key]
    return rows
  }
}
