// The repository as a CAR rooted at the current commit, built as the blocks are read (repo/car.ts)
// in 64 KiB chunks: getRepo (optionally only blocks written after a revision) and getCheckout.
import type { Db, Dialect } from '../db/index.js'
import { exec, hexOf } from '../db/raw.js'
import { CarWriter } from './car.js'
import { syncRepo } from './read.js'

// pages in key order, each one short-lived: the whole repository's rows held at once outlive
// the young generation and are collected as old objects
const PAGE = 1000
const pageSql = (dialect: Dialect, since: boolean) =>
  `select cid, ${hexOf(dialect, 'content')} as hex from repo_block where did = ? and cid > ?` +
  `${since ? ' and repo_rev > ?' : ''} order by cid limit ${PAGE}`

/** the CAR's chunks; throws the sync reads' status errors before any is built */
export async function repoCarChunks(db: Db, did: string, opts: { since?: string; allowDeactivated?: boolean } = {}) {
  const sql = pageSql(db.dialect, !!opts.since)
  // one transaction: the root and its blocks are one consistent snapshot
  return db.transaction().execute(async (trx) => {
    const { root } = await syncRepo(trx, did, { allowDeactivated: opts.allowDeactivated })
    const car = new CarWriter(root.cid)
    for (let after = ''; ; ) {
      const args = opts.since ? [did, after, opts.since] : [did, after]
      const { rows } = await exec<{ cid: string; hex: string }>(trx, db.dialect, sql, args)
      for (const row of rows) car.add(row.cid, row.hex)
      if (rows.length < PAGE) break
      after = rows[rows.length - 1].cid
    }
    return car.end()
  })
}
