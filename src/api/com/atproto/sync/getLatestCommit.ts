// com.atproto.sync.getLatestCommit
import { method } from '#src/api/method.js'
import { syncRepo } from '#src/repo/read.js'

export default method('com.atproto.sync.getLatestCommit', ({ db }) => async ({ params }) => {
  const { root } = await syncRepo(db, params.did)
  return { encoding: 'application/json', body: { cid: root.cid, rev: root.rev } }
})
