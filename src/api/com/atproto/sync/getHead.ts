// com.atproto.sync.getHead (deprecated, still called by older tools): the current commit's CID.
// The account's status is answered first, as every sync read does; an account with no commit yet
// is HeadNotFound.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { findRepoAccount, gateSyncRead, repoHead } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getHead<AuthFor<'com.atproto.sync.getHead'>>(async ({ params }) => {
    const account = await findRepoAccount(db, params.did)
    if (!account) throw xrpcError('RepoNotFound', `Could not find repo for DID: ${params.did}`)
    gateSyncRead(account)
    const root = await repoHead(db, params.did)
    if (!root) throw xrpcError('HeadNotFound', `Could not find root for DID: ${params.did}`)
    return { encoding: 'application/json', body: { root: root.cid } }
  })
