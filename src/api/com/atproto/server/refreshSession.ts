// com.atproto.server.refreshSession: rotation made atomic: the
// presented record is removed by a conditional delete and its successor inserted in the same
// transaction, so of concurrent presentations exactly one succeeds.
import type { Server } from '../../../../generated/server/index.js'
import type { OutputSchema } from '../../../../generated/server/types/com/atproto/server/refreshSession.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { sessionView, storeRefreshRecord, takeRefreshRecord } from '../../../../account/store.js'
import { mintPair } from '../../../../auth/session-tokens.js'
import { appPasswordClaim } from '../../../../account/app-passwords.js'
import { jsonText } from '../../../json-text.js'

export default (api: Server, { db, config, tokenKeys }: Pick<Services, 'db' | 'config' | 'tokenKeys'>) =>
  api.com.atproto.server.refreshSession<AuthFor<'com.atproto.server.refreshSession'>>(async ({ auth }) => {
    const { account, jti } = auth.credentials
    const tokens = await db.transaction().execute(async (trx) => {
      const taken = await takeRefreshRecord(trx, jti)
      if (!taken) throw xrpcError('ExpiredToken', 'Token has been revoked')
      // the app password name stays with the session through every rotation; a
      // revoked app password's sessions are over
      const apw = taken.app_password_name ? await appPasswordClaim(trx, account.did, taken.app_password_name) : undefined
      if (taken.app_password_name && !apw) throw xrpcError('ExpiredToken', 'Token has been revoked')
      const pair = await mintPair(tokenKeys, account.did, apw, account.credential_gen)
      await storeRefreshRecord(trx, {
        jti: pair.refreshJti,
        did: account.did,
        expiresAt: pair.refreshExpiresAt,
        appPasswordName: taken.app_password_name,
      })
      return pair
    })
    // plain JSON values only (strings, booleans): nothing for xrpc-server's lexToJson to convert
    return jsonText<OutputSchema>(
      JSON.stringify({
        accessJwt: tokens.accessJwt,
        refreshJwt: tokens.refreshJwt,
        ...(await sessionView(db, account, config.publicUrl)),
      }),
    )
  })
