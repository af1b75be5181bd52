// com.atproto.sync.getHead (deprecated, still called by older tools): the current commit's CID.
// The account's status is answered first, as every sync read does; an account with no commit yet
// is HeadNotFound.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { findRepoAccount, gateSyncRead, repoHead } from '#src/repo/read.js'

export default method('com.atproto.sync.getHead', ({ db }) => async ({ params }) => {
  const account = await findRepoAccount(db, params.did)
  if (!account) throw xrpcError('RepoNotFound', `Could not find repo for DID: ${params.did}`)
  gateSyncRead(account)
  const root = await repoHead(db, params.did)
  if (!root) throw xrpcError('HeadNotFound', `Could not find root for DID: ${params.did}`)
  return { encoding: 'application/json', body: { root: root.cid } }
})
