// Kysely dialect over one better-sqlite3 database with group commit (wal-sync.ts). Kysely's own
// SQLite driver holds a mutex from acquiring its one connection to releasing it, so a commit that
// awaited its fsync there would keep every other request out for the fsync and no two commits
// could share one. This driver keeps the lock itself and lets go of it as soon as COMMIT returns.
import { chmodSync, closeSync, openSync } from 'node:fs'
import SqliteDatabase from 'better-sqlite3'
import {
  CompiledQuery,
  SelectQueryNode,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely'
import { Checkpointer } from './checkpointer.js'
import { WalSync } from './wal-sync.js'
import { CHECKPOINT, SQLITE } from '../limits.js'

export type SqliteStore = { dialect: Dialect; durable: () => Promise<void> }

/**
 * The database holds password hashes and signing keys: owner-only, whatever the umask. SQLite
 * gives its -wal and -shm files the database file's mode; files an older version left readable
 * are tightened too.
 */
function privateFile(file: string, create = true) {
  if (create) closeSync(openSync(file, 'a', 0o600))
  try {
    chmodSync(file, 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
}

export type SqliteHooks = {
  /** after each completed fsync of the write-ahead log */
  onWalFsync?: () => void
  /** the checkpoint worker failed: the writer's connection checkpoints by itself from then on */
  onCheckpointError?: (err: Error) => void
}

export function openSqlite(file: string, hooks: SqliteHooks = {}): SqliteStore {
  privateFile(file)
  const db = new SqliteDatabase(file)
  db.pragma('journal_mode = WAL')
  // NORMAL: COMMIT writes the WAL without an fsync; WalSync makes each write durable before it
  // is acknowledged, and SQLite still syncs around checkpoints
  db.pragma('synchronous = NORMAL')
  db.pragma('foreign_keys = ON')
  db.pragma(`busy_timeout = ${SQLITE.busyTimeoutMs}`)
  // the log is copied back by a worker thread (checkpointer.ts), never inside a COMMIT on the
  // event loop; if the worker fails, every ~16 MiB of log by the COMMIT as SQLite does by default
  db.pragma('wal_autocheckpoint = 0')
  db.pragma(`journal_size_limit = ${SQLITE.journalSizeLimitBytes}`)
  // negative: in KiB rather than pages
  db.pragma(`cache_size = -${SQLITE.writerCacheKiB}`)
  for (const f of [`${file}-wal`, `${file}-shm`]) privateFile(f, false)
  const lock = new Lock()
  const checkpointer = new Checkpointer(
    file,
    (err) => {
      db.pragma(`wal_autocheckpoint = ${CHECKPOINT.fallbackFrames}`)
      hooks.onCheckpointError?.(err)
    },
    {
      holdWriters: async () => {
        await lock.acquire()
        return () => lock.release()
      },
    },
  )
  const state = new State(db, new WalSync(`${file}-wal`, hooks.onWalFsync), checkpointer, lock)
  return {
    dialect: {
      createDriver: () => new GroupCommitDriver(state),
      createQueryCompiler: () => new SqliteQueryCompiler(),
      createAdapter: () => new UnlockedSqliteAdapter(),
      createIntrospector: (k: Kysely<any>) => new SqliteIntrospector(k),
    },
    durable: () => state.wal.durable(),
  }
}

class UnlockedSqliteAdapter extends SqliteAdapter {
  // the driver serializes access itself; Kysely's mutex would be held through the fsync
  override get supportsMultipleConnections() {
    return true
  }
}

/** FIFO: transactions on the one database never interleave */
class Lock {
  private held = false
  private queue: (() => void)[] = []

  async acquire() {
    if (!this.held) {
      this.held = true
      return
    }
    await new Promise<void>((resolve) => this.queue.push(resolve))
  }

  release() {
    const next = this.queue.shift()
    if (next) next()
    else this.held = false
  }
}

const ROLLBACK = /^\s*rollback\b/i

class State {
  /** the open transaction (or the statement running alone) has written: its end owes an fsync */
  dirty = false
  private cache = new Map<string, SqliteDatabase.Statement>()

  constructor(
    readonly db: SqliteDatabase.Database,
    readonly wal: WalSync,
    readonly checkpointer: Checkpointer,
    /** the one database's turn: a transaction, a statement alone, or a checkpoint's second pass */
    readonly lock: Lock,
  ) {}

  /**
   * Kysely prepares every query anew; better-sqlite3 statements are reusable, so keep the
   * prepared statement per SQL text (bounded, oldest out). A statement still iterating (a streamed
   * query) is busy: then a fresh one is prepared. SQLite re-prepares cached statements by itself
   * after a schema change.
   */
  prepare(sql: string) {
    const hit = this.cache.get(sql)
    if (hit && !hit.busy) return hit
    const stmt = this.db.prepare(sql)
    if (!hit) {
      if (this.cache.size >= SQLITE.statementCache) this.cache.delete(this.cache.keys().next().value as string)
      this.cache.set(sql, stmt)
    }
    return stmt
  }
}

class GroupCommitDriver implements Driver {
  constructor(private state: State) {}

  async init() {}

  async acquireConnection() {
    await this.state.lock.acquire()
    return new Connection(this.state)
  }

  async beginTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('begin'))
  }

  async commitTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('commit'))
  }

  async rollbackTransaction(conn: DatabaseConnection) {
    // let go early means COMMIT went through and only its fsync failed: nothing to undo, and
    // another request may hold the database by now. A disk-full or I/O error may have ended the
    // transaction already (SQLite rolls back by itself): a second rollback would hide that error
    if ((conn as Connection).holding && this.state.db.inTransaction) await conn.executeQuery(CompiledQuery.raw('rollback'))
  }

  async releaseConnection(conn: DatabaseConnection) {
    ;(conn as Connection).release()
  }

  async destroy() {
    await this.state.checkpointer.close()
    await this.state.wal.close()
    this.state.db.close()
    this.state.checkpointer.release()
  }
}

/** one acquisition of the database: holds the lock from acquire until release or a commit */
class Connection implements DatabaseConnection {
  holding = true

  constructor(private state: State) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    await this.hold()
    const { db } = this.state
    const stmt = this.state.prepare(query.sql)
    // INSERT ... RETURNING is a reader that writes; BEGIN/COMMIT/ROLLBACK count as read-only
    if (!stmt.readonly) this.state.dirty = true
    let result: QueryResult<R>
    try {
      result = run<R>(stmt, query.parameters)
    } catch (err) {
      // a failed statement that ended the transaction, or ran alone, committed nothing
      if (!db.inTransaction) this.state.dirty = false
      throw err
    }
    if (db.inTransaction || !this.state.dirty) return result
    this.state.dirty = false
    if (ROLLBACK.test(query.sql)) return result
    const durable = this.state.wal.commit()
    this.state.checkpointer.committed()
    this.release()
    await durable
    return result
  }

  async *streamQuery<R>(query: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    await this.hold()
    if (!SelectQueryNode.is(query.query)) throw new Error('only select queries can be streamed on SQLite')
    for (const row of this.state.prepare(query.sql).iterate(query.parameters)) yield { rows: [row as R] }
  }

  release() {
    if (!this.holding) return
    this.holding = false
    this.state.lock.release()
  }

  // used again after a commit let go of the lock
  private async hold() {
    if (this.holding) return
    await this.state.lock.acquire()
    this.holding = true
  }
}

function run<R>(stmt: SqliteDatabase.Statement, parameters: readonly unknown[]): QueryResult<R> {
  if (stmt.reader) return { rows: stmt.all(parameters) as R[] }
  const { changes, lastInsertRowid } = stmt.run(parameters)
  return { insertId: BigInt(lastInsertRowid), numAffectedRows: BigInt(changes), rows: [] }
}
