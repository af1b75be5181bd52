// Multi-row INSERTs of many rows (importRepo: tens of thousands) without building a query tree
// per row: one SQL text per chunk size (SQLite's statement cache reuses it), values bound as
// arrays. Callers pass rows sorted by the table's primary key, so the B-tree only ever appends.
import { CompiledQuery } from 'kysely'
import type { Dialect } from './index.js'
import type { Store } from '../repo/storage.js'

// bound parameters per statement: under SQLite's 32766 and PostgreSQL's 65535
const MAX_PARAMS = 30_000
const MAX_ROWS = 2000

export async function bulkInsert(
  db: Store,
  dialect: Dialect,
  table: string,
  columns: readonly string[],
  rows: readonly (readonly unknown[])[],
): Promise<void> {
  const per = Math.max(1, Math.min(MAX_ROWS, Math.floor(MAX_PARAMS / columns.length)))
  for (let i = 0; i < rows.length; i += per) {
    const chunk = rows.slice(i, i + per)
    const params: unknown[] = []
    for (const row of chunk) for (const v of row) params.push(v)
    await db.executeQuery(CompiledQuery.raw(insertSql(dialect, table, columns, chunk.length), params))
  }
}

const texts = new Map<string, string>()

function insertSql(dialect: Dialect, table: string, columns: readonly string[], rows: number): string {
  const key = `${dialect} ${table} ${columns.join(',')} ${rows}`
  let text = texts.get(key)
  if (text) return text
  let tuples: string
  if (dialect === 'sqlite') {
    const tuple = `(${'?,'.repeat(columns.length - 1)}?)`
    tuples = `${tuple},`.repeat(rows - 1) + tuple
  } else {
    const parts: string[] = []
    let n = 0
    for (let r = 0; r < rows; r++) parts.push(`(${columns.map(() => `$${++n}`).join(',')})`)
    tuples = parts.join(',')
  }
  text = `insert into "${table}" (${columns.map((c) => `"${c}"`).join(',')}) values ${tuples}`
  // full chunks repeat; a tail's size is kept only while the cache is small
  if (texts.size < 64) texts.set(key, text)
  return text
}
