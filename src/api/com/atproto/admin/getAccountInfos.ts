// com.atproto.admin.getAccountInfos: the accounts among `dids` that exist, unknown ones skipped.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { accountsByDid, accountView } from '#src/account/admin-views.js'

export default method('com.atproto.admin.getAccountInfos', ({ db }) => async ({ params }) => {
  const dids = [...new Set(params.dids)]
  if (dids.length > 100) throw xrpcError('InvalidRequest', 'At most 100 dids per call')
  const rows = await accountsByDid(db, dids)
  const infos = []
  for (const row of rows) infos.push(await accountView(db, row))
  return { encoding: 'application/json', body: { infos } }
})
