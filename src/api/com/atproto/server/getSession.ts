// com.atproto.server.getSession: who the access token belongs to.
import { method } from '#src/api/method.js'
import type { OutputSchema } from '#src/generated/server/types/com/atproto/server/getSession.js'
import { mayReadEmail } from '#src/auth/verifier.js'
import { sessionView } from '#src/account/store.js'
import { jsonText } from '#src/api/json-text.js'

export default method(
  'com.atproto.server.getSession',
  ({ db, config }) =>
    async ({ auth }) =>
      // plain JSON values only (strings, booleans): nothing for xrpc-server's lexToJson to convert
      jsonText<OutputSchema>(
        JSON.stringify(await sessionView(db, auth.credentials.account, config.publicUrl, mayReadEmail(auth.credentials))),
      ),
)
