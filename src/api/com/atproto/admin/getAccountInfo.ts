// com.atproto.admin.getAccountInfo: one account as the operator sees it.
import { method } from '#src/api/method.js'
import { accountByDid, accountView } from '#src/account/admin-views.js'

export default method('com.atproto.admin.getAccountInfo', ({ db }) => async ({ params }) => ({
  encoding: 'application/json',
  body: await accountView(db, await accountByDid(db, params.did)),
}))
