// com.atproto.server.refreshSession: rotation made atomic: the
// presented record is removed by a conditional delete and its successor inserted in the same
// transaction, so of concurrent presentations exactly one succeeds.
import type { Server } from '../../../../generated/server/index.js'
import type { OutputSchema } from '../../../../generated/server/types/com/atproto/server/refreshSession.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { sessionView } from '../../../../account/store.js'
import { rotateRefreshToken } from '../../../../account/refresh.js'
import { jsonText } from '../../../json-text.js'

export default (api: Server, { db, config, tokenKeys }: Pick<Services, 'db' | 'config' | 'tokenKeys'>) =>
  api.com.atproto.server.refreshSession<AuthFor<'com.atproto.server.refreshSession'>>(async ({ auth }) => {
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
