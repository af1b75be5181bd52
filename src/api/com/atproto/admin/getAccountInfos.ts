// com.atproto.admin.getAccountInfos: the accounts among `dids` that exist, unknown ones skipped.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { accountsByDid, accountView } from '../../../../account/admin-views.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.getAccountInfos<AuthFor<'com.atproto.admin.getAccountInfos'>>(async ({ params }) => {
    const dids = [...new Set(params.dids)]
    if (dids.length > 100) throw xrpcError('InvalidRequest', 'At most 100 dids per call')
    const rows = await accountsByDid(db, dids)
    const infos = []
    for (const row of rows) infos.push(await accountView(db, row))
    return { encoding: 'application/json', body: { infos } }
  })
