// com.atproto.server.deleteSession: removes the presented refresh token's record (logout).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { takeRefreshRecord } from '../../../../account/store.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.deleteSession<AuthFor<'com.atproto.server.deleteSession'>>(async ({ auth }) => {
    const taken = await takeRefreshRecord(db, auth.credentials.jti)
    if (!taken) throw xrpcError('ExpiredToken', 'Token has been revoked')
  })
