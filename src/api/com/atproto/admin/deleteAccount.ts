// com.atproto.admin.deleteAccount: as the user's own deletion (status deleted, record kept,
// `#account` then `#tombstone`), without the proofs; an account already deleted is left alone.
import { method } from '#src/api/method.js'
import { accountByDid } from '#src/account/admin-views.js'
import { deleteAccount } from '#src/account/lifecycle.js'

export default method('com.atproto.admin.deleteAccount', ({ db, notifySpacesDeleted }) => async ({ input }) => {
  await accountByDid(db, input.body.did)
  await deleteAccount({ db, notifySpacesDeleted }, input.body.did)
})
