// com.atproto.sync.listRepos: every hosted repository with its head, paged by DID.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.listRepos<AuthFor<'com.atproto.sync.listRepos'>>(async ({ params }) => {
    const limit = params.limit ?? 500
    let q = db
      .selectFrom('repo_root')
      .innerJoin('account', 'account.did', 'repo_root.did')
      .select(['repo_root.did', 'repo_root.cid', 'repo_root.rev', 'account.status'])
      .where('account.status', '!=', 'deleted')
      .orderBy('repo_root.did')
      .limit(limit)
    if (params.cursor) q = q.where('repo_root.did', '>', params.cursor)
    const rows = await q.execute()
    return {
      encoding: 'application/json',
      body: {
        repos: rows.map((r) => ({
          did: r.did,
          head: r.cid,
          rev: r.rev,
          active: r.status === 'active',
          ...(r.status === 'active' ? {} : { status: r.status }),
        })),
        ...(rows.length === limit ? { cursor: rows[rows.length - 1].did } : {}),
      },
    }
  })
