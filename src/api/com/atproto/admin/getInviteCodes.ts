// com.atproto.admin.getInviteCodes: every invite code, newest first (sort=recent) or most used
// first (sort=usage), paged by a cursor naming the last code's sort key and code.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { listInviteCodes } from '../../../../account/invites.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.getInviteCodes<AuthFor<'com.atproto.admin.getInviteCodes'>>(async ({ params }) => {
    const { codes, cursor } = await listInviteCodes(db, {
      sort: params.sort ?? 'recent',
      limit: params.limit ?? 100,
      cursor: params.cursor,
    })
    return { encoding: 'application/json', body: { codes, ...(cursor ? { cursor } : {}) } }
  })
