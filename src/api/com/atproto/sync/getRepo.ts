// com.atproto.sync.getRepo: the repository as a CAR rooted at the current commit; since: only the
// blocks written after that revision. The CAR is built as the blocks are read (repo/car.ts), in
// 64 KiB chunks, and sent once the read is over.
import { Readable } from 'node:stream'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { exec, hexOf } from '../../../../db/raw.js'
import type { Dialect } from '../../../../db/index.js'
import { syncRepo } from '../../../../repo/read.js'
import { CarWriter } from '../../../../repo/car.js'
import type { MigrationAuth } from '../../../../auth/verifier.js'

// pages in key order, each one short-lived: the whole repository's rows held at once outlive
// the young generation and are collected as old objects
const PAGE = 1000
const pageSql = (dialect: Dialect, since: boolean) =>
  `select cid, ${hexOf(dialect, 'content')} as hex from repo_block where did = ? and cid > ?` +
  `${since ? ' and repo_rev > ?' : ''} order by cid limit ${PAGE}`

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getRepo<MigrationAuth>(async ({ auth, params }) => {
    // the migration token of the account itself reads its repository even while deactivated
    const allowDeactivated = auth.credentials.type === 'migration' && auth.credentials.did === params.did
    const sql = pageSql(db.dialect, !!params.since)
    // one transaction: the root and its blocks are one consistent snapshot
    const chunks = await db.transaction().execute(async (trx) => {
      const { root } = await syncRepo(trx, params.did, { allowDeactivated })
      const car = new CarWriter(root.cid)
      for (let after = ''; ; ) {
        const args = params.since ? [params.did, after, params.since] : [params.did, after]
        const { rows } = await exec<{ cid: string; hex: string }>(trx, db.dialect, sql, args)
        for (const row of rows) car.add(row.cid, row.hex)
        if (rows.length < PAGE) break
        after = rows[rows.length - 1].cid
      }
      return car.end()
    })
    return {
      encoding: 'application/vnd.ipld.car',
      body: Readable.from(chunks, { objectMode: false }),
    }
  })
