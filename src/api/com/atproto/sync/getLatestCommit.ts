// com.atproto.sync.getLatestCommit
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { syncRepo } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getLatestCommit<AuthFor<'com.atproto.sync.getLatestCommit'>>(async ({ params }) => {
    const { root } = await syncRepo(db, params.did)
    return { encoding: 'application/json', body: { cid: root.cid, rev: root.rev } }
  })
