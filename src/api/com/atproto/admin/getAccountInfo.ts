// com.atproto.admin.getAccountInfo: one account as the operator sees it.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { accountByDid, accountView } from '../../../../account/admin-views.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.getAccountInfo<AuthFor<'com.atproto.admin.getAccountInfo'>>(async ({ params }) => ({
    encoding: 'application/json',
    body: await accountView(db, await accountByDid(db, params.did)),
  }))
