// com.atproto.server.deleteSession: removes the presented refresh token's record (logout).
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { takeRefreshRecord } from '#src/account/store.js'

export default method('com.atproto.server.deleteSession', ({ db }) => async ({ auth }) => {
  const taken = await takeRefreshRecord(db, auth.credentials.jti)
  if (!taken) throw xrpcError('ExpiredToken', 'Token has been revoked')
})
