// com.atproto.admin.searchAccounts: accounts whose email address or handle starts with `email`
// (every account without it), in DID order, paged by the last DID.
import { sql } from 'kysely'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { accountView } from '../../../../account/admin-views.js'

const likePrefix = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`) + '%'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.searchAccounts<AuthFor<'com.atproto.admin.searchAccounts'>>(async ({ params }) => {
    const limit = params.limit ?? 50
    let q = db.selectFrom('account').selectAll().orderBy('did').limit(limit)
    const term = params.email?.trim().toLowerCase()
    if (term) {
      const p = likePrefix(term)
      q = q.where(sql<boolean>`(email like ${p} escape '\\' or handle like ${p} escape '\\')`)
    }
    if (params.cursor) q = q.where('did', '>', params.cursor)
    const rows = await q.execute()
    const accounts = await Promise.all(rows.map((r) => accountView(db, r)))
    return {
      encoding: 'application/json',
      body: { accounts, ...(rows.length === limit ? { cursor: rows[rows.length - 1].did } : {}) },
    }
  })
