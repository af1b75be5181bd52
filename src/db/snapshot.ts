// Long consistent reads (a repository export streamed to a slow client) that must not hold up
// writers. On SQLite each snapshot is a read transaction on a connection of its own, next to the
// writers' one: in WAL mode it sees the database as of its first read while writers commit on;
// while it is open a checkpoint cannot reset the WAL, which only grows meanwhile. On PostgreSQL it
// is a REPEATABLE READ, READ ONLY transaction on one pool connection: one snapshot for all its
// statements, no locks that writers wait for.
import SqliteDatabase from 'better-sqlite3'
import {
  type CompiledQuery,
  Kysely,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
  type DatabaseConnection,
  type QueryResult,
} from 'kysely'
import type { Schema, Store } from './schema.js'
import { SQLITE } from '../limits.js'

export type Snapshot = {
  store: Store
  /** ends the read transaction; idempotent */
  end: () => Promise<void>
}

/** SQLite: read-only connections on `file`, a few kept open between snapshots */
export function sqliteSnapshots(file: string) {
  const idle: SqliteDatabase.Database[] = []
  const open = () => {
    const conn = new SqliteDatabase(file, { readonly: true })
    conn.pragma(`busy_timeout = ${SQLITE.busyTimeoutMs}`)
    conn.pragma(`cache_size = -${SQLITE.snapshotCacheKiB}`)
    return conn
  }
  return {
    async take(): Promise<Snapshot> {
      const conn = idle.pop() ?? open()
      conn.exec('begin')
      const store = readerKysely(conn)
      let ended = false
      return {
        store,
        end: async () => {
          if (ended) return
          ended = true
          try {
            conn.exec('commit')
          } catch {
            conn.close()
            return
          }
          if (idle.length < SQLITE.idleSnapshots) idle.push(conn)
          else conn.close()
        },
      }
    },
    close() {
      for (const c of idle.splice(0)) c.close()
    },
  }
}

function readerKysely(conn: SqliteDatabase.Database): Store {
  const connection: DatabaseConnection = {
    async executeQuery<R>(q: CompiledQuery): Promise<QueryResult<R>> {
      const stmt = conn.prepare(q.sql)
      if (!stmt.reader) throw new Error('a snapshot only reads')
      return { rows: stmt.all(q.parameters) as R[] }
    },
    // eslint-disable-next-line require-yield
    async *streamQuery() {
      throw new Error('not streamed')
    },
  }
  return new Kysely<Schema>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createQueryCompiler: () => new SqliteQueryCompiler(),
      createIntrospector: (k) => new SqliteIntrospector(k),
      createDriver: () => ({
        init: async () => {},
        acquireConnection: async () => connection,
        beginTransaction: async () => {},
        commitTransaction: async () => {},
        rollbackTransaction: async () => {},
        releaseConnection: async () => {},
        destroy: async () => {},
      }),
    },
  })
}

/** PostgreSQL: one pool connection held in a REPEATABLE READ, READ ONLY transaction until `end` */
export function postgresSnapshot(db: Kysely<Schema>): Promise<Snapshot> {
  return new Promise((resolve, reject) => {
    let finish!: () => void
    const finished = new Promise<void>((r) => (finish = r))
    let settled = false
    const held = db
      .connection()
      .execute(async (conn) => {
        await sql`begin transaction isolation level repeatable read read only`.execute(conn)
        try {
          settled = true
          resolve({ store: conn, end: async () => (finish(), await held) })
          await finished
        } finally {
          await sql`commit`.execute(conn).catch(() => {})
        }
      })
      .catch((err) => {
        if (!settled) reject(err)
      })
  })
}

/**
 * at most `n` snapshots open at once, the next waiting for one to end: on PostgreSQL each holds a
 * pool connection for as long as its client takes to read, and the pool is shared with every request
 */
export function limitSnapshots(take: () => Promise<Snapshot>, n: number): () => Promise<Snapshot> {
  let open = 0
  const waiting: (() => void)[] = []
  return async () => {
    if (open >= n) await new Promise<void>((resolve) => waiting.push(resolve))
    else open++
    let snap: Snapshot
    try {
      snap = await take()
    } catch (err) {
      release()
      throw err
    }
    let ended = false
    return {
      store: snap.store,
      end: async () => {
        if (ended) return
        ended = true
        try {
          await snap.end()
        } finally {
          release()
        }
      },
    }
  }
  // a slot passes straight to the next in line, or is given back
  function release() {
    const next = waiting.shift()
    if (next) next()
    else open--
  }
}
