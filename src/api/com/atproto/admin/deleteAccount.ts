// com.atproto.admin.deleteAccount: as the user's own deletion (status deleted, record kept,
// `#account` then `#tombstone`), without the proofs; an account already deleted is left alone.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { accountByDid } from '../../../../account/admin-views.js'
import { deleteAccount } from '../../../../account/lifecycle.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.deleteAccount<AuthFor<'com.atproto.admin.deleteAccount'>>(async ({ input }) => {
    await accountByDid(db, input.body.did)
    await deleteAccount(db, input.body.did)
  })
