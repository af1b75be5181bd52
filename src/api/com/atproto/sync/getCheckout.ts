// com.atproto.sync.getCheckout (deprecated, still called by older tools): the current commit, its
// tree and records as a CAR. Only the current tree's blocks are stored, so it is getRepo without
// `since`.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { repoCarStream } from '../../../../repo/repo-car.js'
import type { AuthFor } from '../../../../auth/verifier.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getCheckout<AuthFor<'com.atproto.sync.getCheckout'>>(async ({ params }) => ({
    encoding: 'application/vnd.ipld.car',
    body: await repoCarStream(db, params.did),
  }))
