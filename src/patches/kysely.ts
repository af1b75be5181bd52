// Every place this server wraps Kysely (pinned to an exact version in package.json;
// test/library-patches.nodb.test.ts fails when the library changes under it).
//
// retryTransactions: several processes share one PostgreSQL, and a connection can be cut under any of them. A
// transaction whose connection is lost before COMMIT was sent rolled back in full, so it can run
// again on a fresh connection; Kysely has no retry of its own. Relies on `db.transaction()`
// returning a fresh TransactionBuilder per call whose `execute(fn)` runs `fn` in one transaction
// and commits after `fn` resolves, and on every transaction of the app starting there.
//
// afterCommit: Kysely has no commit hook; the local firehose hands on a transaction's events as
// soon as it commits. Relies on the same `execute` resolving only once the commit is done.
import type { Kysely, Transaction } from 'kysely'

/**
 * Runs a transaction again (at most `attempts` times) when it fails with an error `retryable`
 * accepts, unless it failed while committing: whether that one committed is unknown, and the
 * error goes to the caller.
 */
export function retryTransactions<DB>(db: Kysely<DB>, opts: { attempts: number; retryable: (err: unknown) => boolean }): Kysely<DB> {
  const begin = db.transaction.bind(db)
  db.transaction = () => {
    const builder = begin()
    const execute = builder.execute.bind(builder)
    builder.execute = async <T>(fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> => {
      for (let attempt = 1; ; attempt++) {
        let committing = false
        try {
          return await execute(async (trx) => {
            const out = await fn(trx)
            committing = true
            return out
          })
        } catch (err) {
          if (committing || attempt >= opts.attempts || !opts.retryable(err)) throw err
          await new Promise((r) => setTimeout(r, 25 * attempt))
        }
      }
    }
    return builder
  }
  return db
}

/**
 * `committed(trx)` runs after each transaction through `db` commits, with the transaction its
 * work ran in last (a retried transaction runs its work again in a new one).
 */
export function afterCommit<DB>(db: Kysely<DB>, committed: (trx: Transaction<DB>) => void): void {
  const begin = db.transaction.bind(db)
  db.transaction = () => {
    const builder = begin()
    const execute = builder.execute.bind(builder)
    builder.execute = async (fn) => {
      let last: Transaction<DB> | undefined
      const out = await execute((trx) => {
        last = trx
        return fn(trx)
      })
      if (last) committed(last)
      return out
    }
    return builder
  }
}
