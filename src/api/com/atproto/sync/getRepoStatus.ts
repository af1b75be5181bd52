// com.atproto.sync.getRepoStatus: hosting status of a repository, its rev while active.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { findRepoAccount, repoHead } from '#src/repo/read.js'

export default method('com.atproto.sync.getRepoStatus', ({ db }) => async ({ params }) => {
  const account = await findRepoAccount(db, params.did)
  if (!account || !params.did.startsWith('did:')) throw xrpcError('RepoNotFound', `Could not find repo for DID: ${params.did}`)
  const root = await repoHead(db, account.did)
  const active = account.status === 'active'
  return {
    encoding: 'application/json',
    body: {
      did: account.did,
      active,
      ...(active ? {} : { status: account.status }),
      ...(root && active ? { rev: root.rev } : {}),
    },
  }
})
