// com.atproto.admin.getInviteCodes: every invite code, newest first (sort=recent) or most used
// first (sort=usage), paged by a cursor naming the last code's sort key and code.
import { method } from '#src/api/method.js'
import { listInviteCodes } from '#src/account/invites.js'

export default method('com.atproto.admin.getInviteCodes', ({ db }) => async ({ params }) => {
  const { codes, cursor } = await listInviteCodes(db, {
    sort: params.sort ?? 'recent',
    limit: params.limit ?? 100,
    cursor: params.cursor,
  })
  return { encoding: 'application/json', body: { codes, ...(cursor ? { cursor } : {}) } }
})
