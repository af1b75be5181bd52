// com.atproto.sync.getRepoStatus: hosting status of a repository, its rev while active.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { findRepoAccount, repoHead } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getRepoStatus<AuthFor<'com.atproto.sync.getRepoStatus'>>(async ({ params }) => {
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
