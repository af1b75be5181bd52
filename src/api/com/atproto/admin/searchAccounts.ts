// com.atproto.admin.searchAccounts: accounts whose email address or handle starts with `email`
// (every account without it), in DID order, paged by the last DID.
import { method } from '#src/api/method.js'
import { accountView, searchAccountRows } from '#src/account/admin-views.js'

export default method('com.atproto.admin.searchAccounts', ({ db }) => async ({ params }) => {
  const limit = params.limit ?? 50
  const rows = await searchAccountRows(db, { term: params.email?.trim().toLowerCase(), limit, cursor: params.cursor })
  const accounts = await Promise.all(rows.map((r) => accountView(db, r)))
  return {
    encoding: 'application/json',
    body: { accounts, ...(rows.length === limit ? { cursor: rows[rows.length - 1].did } : {}) },
  }
})
