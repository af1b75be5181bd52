// com.atproto.sync.listRepos: every hosted repository with its head, paged by DID.
import { method } from '#src/api/method.js'
import { listRepoHeads } from '#src/repo/read.js'

export default method('com.atproto.sync.listRepos', ({ db }) => async ({ params }) => {
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
