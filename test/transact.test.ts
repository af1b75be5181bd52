// The store's transactions: work registered with onCommit runs once the transaction has
// committed, for the attempt that committed only, and sees what it committed.
import SqliteDatabase from 'better-sqlite3'
import { Kysely, SqliteDialect, sql, type Dialect, type Driver } from 'kysely'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { loadConfig } from '../src/config.js'
import { Db, isConnectionLost, openDb, type Schema } from '../src/db/index.js'
import type { Store } from '../src/db/schema.js'
import { describe, dialect, dropSchema, freePort, tempDir, testEnv } from './harness.js'

const lostConnection = () => Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' })

const addCode = (db: Store, code: string) =>
  db
    .insertInto('invite_code')
    .values({
      code,
      use_count: 0,
      remaining: 1,
      disabled: 0,
      for_account: 'admin',
      created_by: 'admin',
      created_at: new Date().toISOString(),
    })
    .execute()

const hasCode = async (db: Store, code: string) =>
  !!(await db.selectFrom('invite_code').select('code').where('code', '=', code).executeTakeFirst())

describe('store transactions', () => {
  let env: Record<string, string>
  let db: Db
  beforeAll(async () => {
    env = await testEnv(await freePort(), tempDir())
    db = await openDb(loadConfig(env).db)
  })
  afterAll(async () => {
    await db?.destroy()
    await dropSchema(env)
  })

  it('runs onCommit callbacks in order after COMMIT, where they see the committed rows', async () => {
    const order: string[] = []
    let seen: Promise<boolean> | undefined
    const out = await db.transact(async (tx) => {
      await addCode(tx, 'tx-commit')
      tx.onCommit(() => {
        order.push('first')
        // a read outside the transaction: it finds the row only once the transaction committed
        seen = hasCode(db, 'tx-commit')
      })
      tx.onCommit(() => order.push('second'))
      order.push('body')
      return 'answer'
    })
    expect(out).toBe('answer')
    expect(order).toEqual(['body', 'first', 'second'])
    expect(await seen).toBe(true)
  })

  it('drops the callbacks of a transaction that rolls back, and passes its error on', async () => {
    let called = 0
    await expect(
      db.transact(async (tx) => {
        await addCode(tx, 'tx-rollback')
        tx.onCommit(() => called++)
        throw new Error('refused')
      }),
    ).rejects.toThrow('refused')
    expect(called).toBe(0)
    expect(await hasCode(db, 'tx-rollback')).toBe(false)
  })

  it.runIf(dialect === 'postgres')(
    'runs a transaction whose connection was cut before COMMIT again, with the callbacks of the attempt that committed only',
    async () => {
      const calls: number[] = []
      let attempts = 0
      await db.transact(async (tx) => {
        const attempt = ++attempts
        await addCode(tx, `tx-retry-${attempt}`)
        tx.onCommit(() => calls.push(attempt))
        if (attempt === 1) {
          // an operator ends this transaction's backend: its next statement finds the connection gone
          const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(tx)
          await sql`select pg_terminate_backend(${rows[0].pid})`.execute(db)
          await hasCode(tx, 'tx-retry-1')
        }
      })
      expect(attempts).toBe(2)
      expect(calls).toEqual([2])
      expect(await hasCode(db, 'tx-retry-1')).toBe(false)
      expect(await hasCode(db, 'tx-retry-2')).toBe(true)
    },
  )

  it('gives up on a lost connection after three attempts on PostgreSQL, and never retries other errors', async () => {
    let attempts = 0
    await expect(
      db.transact(async () => {
        attempts++
        throw lostConnection()
      }),
    ).rejects.toThrow(/Connection terminated/)
    // SQLite's connection is a file handle: nothing there is retried
    expect(attempts).toBe(dialect === 'postgres' ? 3 : 1)

    attempts = 0
    await expect(
      db.transact(async () => {
        attempts++
        throw new Error('not a connection error')
      }),
    ).rejects.toThrow('not a connection error')
    expect(attempts).toBe(1)
  })

  it('runs onCommit at once for a statement outside a transaction: it has committed already', async () => {
    await addCode(db, 'alone')
    let called = false
    db.onCommit(() => (called = true))
    expect(called).toBe(true)
  })

  it('never runs a transaction again that failed while committing: it may have committed', async () => {
    const state = { failCommit: true }
    const flaky = new Db({
      kysely: flakyKysely(state),
      dialect: 'sqlite',
      durable: () => Promise.resolve(),
      snapshot: () => Promise.reject(new Error('no snapshots here')),
      retryable: isConnectionLost,
    })
    let attempts = 0
    let called = 0
    await expect(
      flaky.transact(async (tx) => {
        attempts++
        tx.onCommit(() => called++)
      }),
    ).rejects.toThrow(/Connection terminated/)
    expect(attempts).toBe(1)
    expect(called).toBe(0)
    await flaky.destroy()
  })
})

// SQLite in memory, whose COMMIT fails once with a lost connection while `failCommit` is set
function flakyKysely(state: { failCommit: boolean }) {
  const base = new SqliteDialect({ database: new SqliteDatabase(':memory:') })
  const kyselyDialect: Dialect = {
    createAdapter: () => base.createAdapter(),
    createIntrospector: (db) => base.createIntrospector(db),
    createQueryCompiler: () => base.createQueryCompiler(),
    createDriver: (): Driver => {
      const driver = base.createDriver()
      return {
        init: () => driver.init(),
        acquireConnection: () => driver.acquireConnection(),
        beginTransaction: (c, s) => driver.beginTransaction(c, s),
        rollbackTransaction: (c) => driver.rollbackTransaction(c),
        releaseConnection: (c) => driver.releaseConnection(c),
        destroy: () => driver.destroy(),
        commitTransaction: async (c) => {
          if (state.failCommit) {
            state.failCommit = false
            throw lostConnection()
          }
          return driver.commitTransaction(c)
        },
      }
    },
  }
  return new Kysely<Schema>({ dialect: kyselyDialect })
}
