// com.atproto.server.refreshSession: rotation made atomic: the
// presented record is removed by a conditional delete and its successor inserted in the same
// transaction, so of concurrent presentations exactly one succeeds.
import { method } from '#src/api/method.js'
import type { OutputSchema } from '#src/generated/server/types/com/atproto/server/refreshSession.js'
import { sessionView } from '#src/account/store.js'
import { rotateRefreshToken } from '#src/account/refresh.js'
import { jsonText } from '#src/api/json-text.js'

export default method('com.atproto.server.refreshSession', ({ db, config, tokenKeys }) => async ({ auth }) => {
  const { account, jti } = auth.credentials
  const tokens = await rotateRefreshToken({ db, tokenKeys }, account, jti)
  // plain JSON values only (strings, booleans): nothing for xrpc-server's lexToJson to convert
  return jsonText<OutputSchema>(
    JSON.stringify({
      accessJwt: tokens.accessJwt,
      refreshJwt: tokens.refreshJwt,
      ...(await sessionView(db, account, config.publicUrl)),
    }),
  )
})
