// com.atproto.sync.listRepos: every hosted repository with its head, paged by DID.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { listRepoHeads } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.listRepos<AuthFor<'com.atproto.sync.listRepos'>>(async ({ params }) => {
    const limit = params.limit ?? 500
    const rows = await listRepoHeads(db, { limit, cursor: params.cursor })
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
