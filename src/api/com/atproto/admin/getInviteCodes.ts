// com.atproto.admin.getInviteCodes: every invite code, newest first (sort=recent) or most used
// first (sort=usage), paged by a cursor naming the last code's sort key and code.
import { sql } from 'kysely'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { inviteCodeViews } from '../../../../account/invites.js'
import { xrpcError } from '../../../../errors.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.getInviteCodes<AuthFor<'com.atproto.admin.getInviteCodes'>>(async ({ params }) => {
    const sort = params.sort ?? 'recent'
    if (sort !== 'recent' && sort !== 'usage') throw xrpcError('InvalidRequest', 'sort is recent or usage')
    const limit = params.limit ?? 100
    // uses so far: remaining counts down from use_count at each sign-up
    const key = sort === 'recent' ? sql<string>`created_at` : sql<number>`(use_count - remaining)`
    let q = db
      .selectFrom('invite_code')
      .select(['code', 'created_at', sql<number>`(use_count - remaining)`.as('used')])
      .orderBy(key, 'desc')
      .orderBy('code', 'desc')
      .limit(limit)
    if (params.cursor) {
      const at = params.cursor.lastIndexOf('::')
      const [k, code] = [params.cursor.slice(0, at), params.cursor.slice(at + 2)]
      const value = sort === 'usage' ? Number(k) : k
      if (at < 0 || (sort === 'usage' && !Number.isSafeInteger(value))) throw xrpcError('InvalidRequest', 'Malformed cursor')
      q = q.where(sql<boolean>`(${key} < ${value} or (${key} = ${value} and code < ${code}))`)
    }
    const rows = await q.execute()
    const views = new Map((await inviteCodeViews(db, { codes: rows.map((r) => r.code) })).map((v) => [v.code, v]))
    const last = rows[rows.length - 1]
    return {
      encoding: 'application/json',
      body: {
        codes: rows.map((r) => views.get(r.code)!),
        ...(rows.length === limit ? { cursor: `${sort === 'recent' ? last.created_at : Number(last.used)}::${last.code}` } : {}),
      },
    }
  })
