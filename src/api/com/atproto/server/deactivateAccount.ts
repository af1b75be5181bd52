// com.atproto.server.deactivateAccount: active → deactivated with an `#account` event; refresh
// tokens stay valid. `deleteAfter` is accepted and ignored.
import { method } from '#src/api/method.js'
import { deactivate } from '#src/account/lifecycle.js'

export default method('com.atproto.server.deactivateAccount', ({ db }) => async ({ auth }) => {
  await deactivate(db, auth.credentials.did)
})
